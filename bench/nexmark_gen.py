"""The Nexmark event generator, columnar: Person, Auction and Bid events as Arrow record batches.

Written here from the published model (the Nexmark suite of Apache Beam and
its Flink port: ``GeneratorConfig``, ``PersonGenerator``, ``AuctionGenerator``,
``BidGenerator``), so that every peer of ``bench/nexmark.py`` reads the same
events and the numbers compare with the published ones.  The model:

* **Event ids and kinds.**  Event ``e`` (0, 1, 2, ...) is a person, an
  auction or a bid by ``e % 50``: 1, 3 and 46 of every 50 (2% / 6% / 92%).
* **Ids.**  A person's id is ``1000 +`` the number of persons before it, an
  auction's ``1000 +`` the number of auctions before it; categories 10-14.
* **Event time.**  ``base + e * 1000 // rate`` milliseconds (the model's
  ``timestampForEvent`` at a constant rate, ``outOfOrderGroupSize`` 1): in
  order, monotone over the whole stream.
* **Hot keys.**  A bid is for a *hot* auction (the first of the last hundred
  auctions) with probability 1 - 1/``hot_auction_ratio``, else for one of
  the last ``num_in_flight_auctions`` auctions or up to 10 ahead (the model's
  ``AUCTION_ID_LEAD``: a bid may name an auction generated just after it);
  its bidder is hot (the second of the last hundred persons) with
  probability 1 - 1/``hot_bidders_ratio``, else one of the last
  ``num_active_people`` persons or up to 10 ahead; an auction's seller
  likewise (the first of the last hundred persons, ``hot_sellers_ratio``).
* **Prices** ``round(10 ** (6 u) * 100)`` cents, ``u`` uniform in [0, 1):
  log-uniform from 100 to 10^8; a reserve is the initial bid plus another.
* **Auction length** ``1 + uniform(0, 2 * horizon)`` ms, the horizon being
  the event time until ``num_in_flight_auctions`` more auctions exist.
* **Strings** as the model makes them: random lower-case words (3 to n-1
  letters, a space in 1 of 13), names from the model's first and last names,
  cities and states from its lists, credit cards of four groups of four
  digits; a bid's channel is one of four hot channels with probability 1/2,
  else ``channel-N`` (N < 10,000) whose URL carries ``&channel_id=`` with
  probability 9/10; ``extra`` pads a row to the model's average size only
  when ``pad_extra`` is set (it is empty otherwise: no query reads it but to
  copy it, and 10M padded bids are most of a gigabyte on a shared machine).

Deviations, by design: the random draws are numpy's (PCG64), not Java's
``Random``, so values differ from the Java generator's while every
distribution and relationship is the model's; the bidder id gets 1000 added
once (Flink's port adds it twice, a known bug there).

Deterministic by seed: events are made in blocks of ``BLOCK`` ids, each block
from its own generator seeded by ``(seed, block number)``, so the events do
not depend on how a caller batches them.  Columnar: each block is a few
numpy operations per column, no Python per event (about 450,000 events/s
on the shared 2-core machine at load 12-18, where everything runs several
times slower than alone; the URLs and strings are most of the cost).

Usage: ``python bench/nexmark_gen.py --events 10000000 [--seed 0] [--out DIR --format csv|parquet]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BLOCK = 1 << 16  # event ids per independently seeded block
FIRST_PERSON_ID, FIRST_AUCTION_ID, FIRST_CATEGORY_ID = 1000, 1000, 10
NUM_CATEGORIES, ID_LEAD, HOT_RATIO = 5, 10, 100
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
          "Cheyenne")
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
KINDS = ("person", "auction", "bid")
TS = pa.timestamp("ms")
SCHEMAS = {
    "person": pa.schema([("id", pa.int64()), ("name", pa.string()), ("emailAddress", pa.string()),
                         ("creditCard", pa.string()), ("city", pa.string()), ("state", pa.string()),
                         ("dateTime", TS), ("extra", pa.string())]),
    "auction": pa.schema([("id", pa.int64()), ("itemName", pa.string()), ("description", pa.string()),
                          ("initialBid", pa.int64()), ("reserve", pa.int64()), ("dateTime", TS), ("expires", TS),
                          ("seller", pa.int64()), ("category", pa.int64()), ("extra", pa.string())]),
    "bid": pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                      ("channel", pa.string()), ("url", pa.string()), ("dateTime", TS), ("extra", pa.string())]),
}


@dataclass(frozen=True)
class GeneratorConfig:
    """The model's parameters, with its defaults (Beam's ``NexmarkConfiguration``, Flink's nexmark.yaml)."""

    events: int
    seed: int = 0
    rate: int = 10_000  # events per second of event time (the model's firstEventRate)
    base_time_ms: int = 1_436_918_400_000  # 2015-07-15 00:00:00 UTC
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    num_active_people: int = 1000
    num_in_flight_auctions: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    pad_extra: bool = False
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    def timestamp(self, e: np.ndarray) -> np.ndarray:
        """Event time in ms of event ids ``e``: one every ``1/rate`` s, in order."""
        return self.base_time_ms + e * 1000 // self.rate

    def last_person(self, e: np.ndarray) -> np.ndarray:
        """Base-0 id of the last person made at or before each event (the model's ``lastBase0PersonId``)."""
        epoch, offset = np.divmod(e, self.total_proportion)
        return epoch * self.person_proportion + np.minimum(offset, self.person_proportion - 1)

    def last_auction(self, e: np.ndarray) -> np.ndarray:
        """Base-0 id of the last auction made at or before each event (``lastBase0AuctionId``)."""
        epoch, offset = np.divmod(e, self.total_proportion)
        p, a = self.person_proportion, self.auction_proportion
        before = offset < p  # a person: the last auction of the previous epoch
        epoch = np.where(before, epoch - 1, epoch)
        offset = np.where(before | (offset >= p + a), a - 1, offset - p)
        return epoch * a + offset


def _some_person(cfg: GeneratorConfig, e: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One of the active persons, or up to ``ID_LEAD`` ahead (``nextBase0PersonId``)."""
    people = cfg.last_person(e) + 1
    active = np.minimum(people, cfg.num_active_people)
    return people - active + (rng.random(len(e)) * (active + ID_LEAD)).astype(np.int64)


def _some_auction(cfg: GeneratorConfig, e: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One of the auctions in flight, or up to ``ID_LEAD`` ahead (``nextBase0AuctionId``)."""
    last = cfg.last_auction(e)
    first = np.maximum(last - cfg.num_in_flight_auctions, 0)
    return first + (rng.random(len(e)) * (last - first + 1 + ID_LEAD)).astype(np.int64)


def _hot_or(rng: np.random.Generator, ratio: int, hot: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``hot`` with probability 1 - 1/ratio, else ``other`` (the model's ``nextInt(ratio) > 0``)."""
    return np.where(rng.integers(ratio, size=len(hot)) > 0, hot, other)


def _prices(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.round(10.0 ** (rng.random(n) * 6.0) * 100.0).astype(np.int64)


def _strings(rng: np.random.Generator, lengths: np.ndarray, special: int = ord(" ")) -> pa.Array:
    """Random lower-case strings of the given lengths, ``special`` in 1 of 13 places (``nextString``)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = (rng.integers(26, size=int(offsets[-1]), dtype=np.uint8) + ord("a")).astype(np.uint8)
    chars[rng.integers(13, size=len(chars)) == 0] = special
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def _words(rng: np.random.Generator, n: int, max_length: int, special: int = ord(" ")) -> pa.Array:
    """``n`` strings of 3 to ``max_length - 1`` characters."""
    return _strings(rng, 3 + rng.integers(max_length - 3, size=n), special)


def _extra(cfg: GeneratorConfig, rng: np.random.Generator, n: int, size: int, average: int) -> pa.Array:
    """Padding to the model's average row size (``nextExtra``: +-20% around it), or empty strings."""
    if not cfg.pad_extra or size >= average:
        return pa.StringArray.from_buffers(n, pa.py_buffer(np.zeros(n + 1, dtype=np.int32)), pa.py_buffer(b""))
    want = average - size
    delta = max(round(want * 0.2), 1)
    return _strings(rng, want - delta + rng.integers(2 * delta, size=n))


def _digits(rng: np.random.Generator, n: int) -> pa.Array:
    """Credit card numbers: four groups of four digits."""
    cells = np.full((n, 19), ord(" "), dtype=np.uint8)
    for group in range(4):
        cells[:, group * 5:group * 5 + 4] = rng.integers(10, size=(n, 4)) + ord("0")
    offsets = np.arange(0, 19 * n + 1, 19, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(cells.tobytes()))


def channel_table(seed: int) -> tuple[pa.Array, pa.Array]:
    """(channels, urls): the four hot channels, then ``channel-0`` ... ``channel-9999``, each with its URL.

    The model caches one URL per channel (a random ``https://www.nexmark.com/a/b/c/item.htm?query=1``),
    9 in 10 with ``&channel_id=`` and the channel number's bits reversed; made once per seed here.
    """
    rng = np.random.default_rng([seed, 1 << 40])
    n = len(HOT_CHANNELS) + CHANNELS
    parts = [_words(rng, n, 5, ord("_")).to_pylist() for _ in range(3)]
    number = np.arange(CHANNELS, dtype=np.uint32)
    reversed_bits = np.zeros(CHANNELS, dtype=np.uint32)
    for bit in range(32):
        reversed_bits |= ((number >> np.uint32(bit)) & np.uint32(1)) << np.uint32(31 - bit)
    channel_ids = np.abs(reversed_bits.view(np.int32).astype(np.int64))
    tagged = rng.integers(10, size=CHANNELS) > 0
    channels, urls = list(HOT_CHANNELS), []
    for i in range(n):
        urls.append(f"https://www.nexmark.com/{parts[0][i]}/{parts[1][i]}/{parts[2][i]}/item.htm?query=1")
    for c in range(CHANNELS):
        channels.append(f"channel-{c}")
        if tagged[c]:
            urls[len(HOT_CHANNELS) + c] += f"&channel_id={channel_ids[c]}"
    return pa.array(channels, pa.string()), pa.array(urls, pa.string())


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms.astype("datetime64[ms]"), TS)


def _persons(cfg: GeneratorConfig, e: np.ndarray, rng: np.random.Generator) -> pa.RecordBatch:
    n = len(e)
    names = pa.array([f"{f} {s}" for f in FIRST_NAMES for s in LAST_NAMES], pa.string())
    name = names.take(pa.array(rng.integers(len(names), size=n)))
    email = pc.binary_join_element_wise(_words(rng, n, 7), _words(rng, n, 5), "@")
    email = pc.binary_join_element_wise(email, pa.scalar(".com"), "")
    card = _digits(rng, n)
    city = pa.array(CITIES).take(pa.array(rng.integers(len(CITIES), size=n)))
    state = pa.array(STATES).take(pa.array(rng.integers(len(STATES), size=n)))
    extra = _extra(cfg, rng, n, 8 + 64, cfg.avg_person_bytes)
    return pa.record_batch([pa.array(cfg.last_person(e) + FIRST_PERSON_ID), name, email, card, city, state,
                            _timestamps(cfg.timestamp(e)), extra], schema=SCHEMAS["person"])


def _auctions(cfg: GeneratorConfig, e: np.ndarray, rng: np.random.Generator) -> pa.RecordBatch:
    n = len(e)
    seller = _hot_or(rng, cfg.hot_sellers_ratio, cfg.last_person(e) // HOT_RATIO * HOT_RATIO,
                     _some_person(cfg, e, rng)) + FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + rng.integers(NUM_CATEGORIES, size=n)
    initial = _prices(rng, n)
    reserve = initial + _prices(rng, n)
    ts = cfg.timestamp(e)
    ahead = cfg.num_in_flight_auctions * cfg.total_proportion // cfg.auction_proportion
    horizon = cfg.timestamp(e + ahead) - ts
    expires = ts + 1 + (rng.random(n) * np.maximum(2 * horizon, 1)).astype(np.int64)
    item, description = _words(rng, n, 20), _words(rng, n, 100)
    extra = _extra(cfg, rng, n, 8 + 20 + 100 + 40, cfg.avg_auction_bytes)
    return pa.record_batch([pa.array(cfg.last_auction(e) + FIRST_AUCTION_ID), item, description, pa.array(initial),
                            pa.array(reserve), _timestamps(ts), _timestamps(expires), pa.array(seller),
                            pa.array(category), extra], schema=SCHEMAS["auction"])


def _bids(cfg: GeneratorConfig, e: np.ndarray, rng: np.random.Generator,
          table: tuple[pa.Array, pa.Array]) -> pa.RecordBatch:
    n = len(e)
    auction = _hot_or(rng, cfg.hot_auction_ratio, cfg.last_auction(e) // HOT_RATIO * HOT_RATIO,
                      _some_auction(cfg, e, rng)) + FIRST_AUCTION_ID
    bidder = _hot_or(rng, cfg.hot_bidders_ratio, cfg.last_person(e) // HOT_RATIO * HOT_RATIO + 1,
                     _some_person(cfg, e, rng)) + FIRST_PERSON_ID
    price = _prices(rng, n)
    which = np.where(rng.integers(2, size=n) > 0, rng.integers(len(HOT_CHANNELS), size=n),
                     len(HOT_CHANNELS) + rng.integers(CHANNELS, size=n))
    which = pa.array(which)
    extra = _extra(cfg, rng, n, 32, cfg.avg_bid_bytes)
    return pa.record_batch([pa.array(auction), pa.array(bidder), pa.array(price), table[0].take(which),
                            table[1].take(which), _timestamps(cfg.timestamp(e)), extra], schema=SCHEMAS["bid"])


def block(cfg: GeneratorConfig, number: int, table: tuple[pa.Array, pa.Array] | None = None) -> dict[str, pa.RecordBatch]:
    """The events of block ``number`` (ids ``number * BLOCK`` up to the configured count), by kind."""
    first = number * BLOCK
    e = np.arange(first, min(first + BLOCK, cfg.events), dtype=np.int64)
    rng = np.random.default_rng([cfg.seed, number])
    offset = e % cfg.total_proportion
    p, a = cfg.person_proportion, cfg.auction_proportion
    return {"person": _persons(cfg, e[offset < p], rng),
            "auction": _auctions(cfg, e[(offset >= p) & (offset < p + a)], rng),
            "bid": _bids(cfg, e[offset >= p + a], rng, table or channel_table(cfg.seed))}


SIDE_INPUT_ROWS = 10_000


def side_input(rows: int = SIDE_INPUT_ROWS) -> pa.RecordBatch:
    """q13's bounded side input: (key, value) rows, key 0..rows-1 and value a function of it (the suite reads
    a file of such rows; Beam's model makes value from key too), the same on every run.

    >>> side_input(3).to_pydict()
    {'key': [0, 1, 2], 'value': [0, 7, 14]}
    """
    key = np.arange(rows, dtype=np.int64)
    return pa.record_batch([pa.array(key), pa.array(key * 7 % 1000)], names=["key", "value"])


def blocks(cfg: GeneratorConfig) -> Iterator[dict[str, pa.RecordBatch]]:
    """Every block in event order."""
    table = channel_table(cfg.seed)
    for number in range((cfg.events + BLOCK - 1) // BLOCK):
        yield block(cfg, number, table)


def generate(cfg: GeneratorConfig) -> dict[str, pa.Table]:
    """All the events, one table per kind (each in event-time order)."""
    parts: dict[str, list[pa.RecordBatch]] = {k: [] for k in KINDS}
    for made in blocks(cfg):
        for kind, batch in made.items():
            parts[kind].append(batch)
    return {k: pa.Table.from_batches(parts[k], schema=SCHEMAS[k]) for k in KINDS}


def write(cfg: GeneratorConfig, directory: Path, fmt: str = "csv") -> dict[str, Path]:
    """The events as ``person``, ``auction`` and ``bid`` files (CSV without a header, as Flink's filesystem
    connector reads it, timestamps ``yyyy-MM-dd HH:mm:ss.SSS``; or Parquet), streamed block by block."""
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    if fmt not in ("csv", "parquet"):
        raise ValueError(f"unknown format {fmt!r} (csv or parquet)")
    directory.mkdir(parents=True, exist_ok=True)
    paths = {k: directory / f"{k}.{fmt}" for k in KINDS}
    if fmt == "csv":
        writers = {k: csv.CSVWriter(paths[k], SCHEMAS[k], write_options=csv.WriteOptions(include_header=False))
                   for k in KINDS}
    else:
        writers = {k: pq.ParquetWriter(paths[k], SCHEMAS[k]) for k in KINDS}
    try:
        for made in blocks(cfg):
            for kind, batch in made.items():
                writers[kind].write(batch if fmt == "parquet" else _csv_ready(batch))
    finally:
        for w in writers.values():
            w.close()
    return paths


def _csv_ready(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Timestamps as ``2015-07-15 00:00:00.000`` text (Flink's CSV format reads TIMESTAMP(3) so)."""
    cols = [pc.strftime(c, "%Y-%m-%d %H:%M:%S")  # %S of a ms timestamp has its 3 decimals
            if pa.types.is_timestamp(c.type) else c for c in batch.columns]
    return pa.record_batch(cols, names=batch.schema.names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pad-extra", action="store_true", help="pad rows to the model's average sizes")
    parser.add_argument("--out", type=Path, help="write the events here (else only time the generator)")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv")
    args = parser.parse_args(argv)
    cfg = GeneratorConfig(args.events, seed=args.seed, pad_extra=args.pad_extra)
    began = time.perf_counter()
    if args.out:
        paths = write(cfg, args.out, args.format)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    else:
        counts = {k: t.num_rows for k, t in generate(cfg).items()}
        print(", ".join(f"{v:,} {k}s" for k, v in counts.items()))
    seconds = time.perf_counter() - began
    print(f"{args.events:,} events in {seconds:.2f} s: {args.events / seconds:,.0f} events/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
