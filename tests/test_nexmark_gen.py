"""The Nexmark generator (bench/nexmark_gen.py) keeps the model's promises: the ones every query's result rests on.

Determinism by seed (whatever the batching), the 1/3/46 proportions per 50
events, ids that start at 1000 and count up, bids and auctions that name
persons and auctions of the stream (the model lets a reference run up to 10
ids ahead of the last one made), monotone event time at the configured rate,
the hot auctions and bidders in the model's proportions, prices in the
model's range, and files that read back as the same events.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.bench import bench_importable

pytestmark = pytest.mark.slow  # benchmark code, as tests/test_bench_m3.py


@pytest.fixture
def gen(monkeypatch):
    for _ in bench_importable(monkeypatch, ("nexmark_gen",)):
        import nexmark_gen

        yield nexmark_gen


def test_the_same_seed_makes_the_same_events_and_another_seed_others(gen):
    one = gen.generate(gen.GeneratorConfig(150_000, seed=7))
    again = gen.generate(gen.GeneratorConfig(150_000, seed=7))
    other = gen.generate(gen.GeneratorConfig(150_000, seed=8))
    assert all(one[k].equals(again[k]) for k in gen.KINDS)
    assert not one["bid"].column("price").equals(other["bid"].column("price"))
    # a block is the same whether it is made alone or within the stream
    cfg = gen.GeneratorConfig(150_000, seed=7)
    first, second = gen.block(cfg, 0)["bid"], gen.block(cfg, 1)["bid"]
    assert one["bid"].slice(first.num_rows, second.num_rows).equals(pa.Table.from_batches([second]))


def test_one_person_three_auctions_and_forty_six_bids_in_every_fifty_events(gen):
    t = gen.generate(gen.GeneratorConfig(100_000))
    assert (t["person"].num_rows, t["auction"].num_rows, t["bid"].num_rows) == (2_000, 6_000, 92_000)
    assert [f.name for f in t["bid"].schema] == ["auction", "bidder", "price", "channel", "url", "dateTime", "extra"]


def test_ids_count_up_from_1000_and_references_name_persons_and_auctions_of_the_stream(gen):
    t = gen.generate(gen.GeneratorConfig(200_000, seed=3))
    persons = t["person"].column("id").to_numpy()
    auctions = t["auction"].column("id").to_numpy()
    assert (persons == np.arange(1000, 1000 + len(persons))).all()
    assert (auctions == np.arange(1000, 1000 + len(auctions))).all()
    lead = gen.ID_LEAD
    sellers = t["auction"].column("seller").to_numpy()
    bidders = t["bid"].column("bidder").to_numpy()
    bid_auctions = t["bid"].column("auction").to_numpy()
    assert sellers.min() >= 1000 and bidders.min() >= 1000 and bid_auctions.min() >= 1000
    assert sellers.max() <= persons.max() + lead and bidders.max() <= persons.max() + lead
    assert bid_auctions.max() <= auctions.max() + lead
    # a reference is never to an entity made later than ID_LEAD ids after the last one at its time
    ms = lambda table: table.column("dateTime").cast(pa.int64()).to_numpy()  # noqa: E731
    made_by = np.searchsorted(ms(t["auction"]), ms(t["bid"]), side="right")  # auctions made by each bid's time
    assert (bid_auctions - 1000 < made_by + lead).all()
    # nearly all of them exist by the end of the stream (the lead only reaches past the last few)
    assert np.isin(bid_auctions, auctions).mean() > 0.999 and np.isin(bidders, persons).mean() > 0.999
    assert np.isin(sellers, persons).mean() > 0.999
    assert set(pc.unique(t["auction"].column("category")).to_pylist()) == {10, 11, 12, 13, 14}


def test_event_time_is_monotone_at_the_configured_rate(gen):
    cfg = gen.GeneratorConfig(100_000, rate=1_000)
    t = gen.generate(cfg)
    whole = np.concatenate([t[k].column("dateTime").cast(pa.int64()).to_numpy() for k in gen.KINDS])
    ids = np.concatenate([np.flatnonzero(np.isin(np.arange(100_000) % 50, rng)) for rng in
                          (range(0, 1), range(1, 4), range(4, 50))])
    assert (whole[np.argsort(ids)] == cfg.base_time_ms + np.arange(100_000)).all()  # 1 ms apart at 1,000/s
    for kind in gen.KINDS:
        assert (np.diff(t[kind].column("dateTime").cast(pa.int64()).to_numpy()) >= 0).all()
    auctions = t["auction"]
    assert pc.all(pc.greater(auctions.column("expires"), auctions.column("dateTime"))).as_py()


def test_hot_auctions_and_bidders_and_prices_follow_the_model(gen):
    t = gen.generate(gen.GeneratorConfig(200_000, seed=5))
    bids = t["bid"]
    auction = bids.column("auction").to_numpy() - 1000
    bidder = bids.column("bidder").to_numpy() - 1000
    # hot auction: the first of a hundred (half the bids); hot bidder: the second of a hundred (3 in 4)
    assert 0.49 < (auction % 100 == 0).mean() < 0.53
    assert 0.74 < (bidder % 100 == 1).mean() < 0.78
    price = bids.column("price").to_numpy()
    assert price.min() >= 100 and price.max() <= 100_000_000
    decades = np.histogram(np.log10(price), bins=6, range=(2, 8))[0] / len(price)
    assert (abs(decades - 1 / 6) < 0.01).all()  # log-uniform over six decades
    hot = pc.is_in(bids.column("channel"), pa.array(list(gen.HOT_CHANNELS)))
    assert 0.48 < pc.mean(hot.cast(pa.int8())).as_py() < 0.52
    reserve, initial = t["auction"].column("reserve").to_numpy(), t["auction"].column("initialBid").to_numpy()
    assert (reserve > initial).all()


def test_csv_and_parquet_files_read_back_as_the_same_events(gen, tmp_path):
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    cfg = gen.GeneratorConfig(5_000, seed=2)
    t = gen.generate(cfg)
    pq_paths = gen.write(cfg, tmp_path / "pq", "parquet")
    assert all(pq.read_table(pq_paths[k]).equals(t[k]) for k in gen.KINDS)
    csv_paths = gen.write(cfg, tmp_path / "csv", "csv")
    schema = gen.SCHEMAS["auction"]
    read = csv.read_csv(csv_paths["auction"], read_options=csv.ReadOptions(column_names=schema.names),
                        convert_options=csv.ConvertOptions(column_types=schema, strings_can_be_null=False))
    assert read.equals(t["auction"])
    with pytest.raises(ValueError, match="unknown format"):
        gen.write(cfg, tmp_path / "x", "json")
