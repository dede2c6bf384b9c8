#!/usr/bin/env bash
# The demo behind `make demo`: start a Head and three nodes on this machine
# (`boreas cluster up`), attach a global component (`boreas watch`), submit
# the examples, extend and modify the running topology, show a refused
# submission, print what the Head and the nodes hold, run TPC-H Q3 in an m3
# box and read it with `boreas query` (cross-checked with Spark SQL), show
# what the watcher saw, push readings through the chain with Spark and
# cross-check the averages with Spark SQL, and print the web UI's URL (in a
# terminal the cluster then keeps running until Ctrl-C).
# Safe to run again: it starts from a fresh embedded catalog each time.  The
# example deployments name nodes by position (#0, #1, #2), so with
# DEMO_BASE_PORT set they go to this demo's nodes, not to whatever else
# listens on 15000-15002.
set -euo pipefail
cd "$(dirname "$0")/.."
BOREAS=.venv/bin/boreas
HEAD_PORT=${DEMO_HEAD_PORT:-14000}
BASE_PORT=${DEMO_BASE_PORT:-15000}
CATALOG="sqlite:///${PWD}/demo-catalog.db"
rm -f demo-catalog.db* demo-*.log demo-modify.xml

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

step "start a cluster: a Head on :$HEAD_PORT and three nodes from :$BASE_PORT"
unset BOREAS_TOKEN
$BOREAS cluster up --nodes 3 --catalog "$CATALOG" --head-port "$HEAD_PORT" --base-port "$BASE_PORT" \
  > demo-cluster.log 2> demo-cluster-processes.log &
pids+=($!)
for _ in $(seq 300); do
  grep -q "press Ctrl-C" demo-cluster.log 2>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat demo-cluster.log demo-cluster-processes.log; exit 1; }
  sleep 0.1
done
cat demo-cluster.log
export BOREAS_HEAD="http://localhost:$HEAD_PORT"
BOREAS_TOKEN=$(awk '$1 == "token" {print $2}' demo-cluster.log)
export BOREAS_TOKEN

step "attach a global component that prints the catalog and every change"
$BOREAS watch > demo-watch.log 2>&1 &
pids=($! "${pids[@]}")
for _ in $(seq 100); do grep -q "full copy" demo-watch.log && break; sleep 0.1; done

step "submit the examples; each node acknowledges its part"
for app in sensor_chain packet_aggregate trade_join; do
  $BOREAS submit "examples/xml/$app.xml" "examples/xml/${app}_deploy.xml"
done

step "modify a running box: only its node is sent an update"
cat > demo-modify.xml <<'XML'
<borealis>
  <modify box="valid"><parameter name="expression.0" value="celsius &gt; -50.0 and celsius &lt; 60.0"/></modify>
</borealis>
XML
$BOREAS submit demo-modify.xml

step "a bad submission is refused with every reason, and changes nothing"
echo "(a real Borealis pair: its Packet stream is already declared here, and it names its nodes by"
echo " endpoint, :15000 and :15100, which are not all nodes of this cluster; the examples use #0..#2)"
set +e
$BOREAS submit tests/data/borealis/move_Move.xml tests/data/borealis/move_MoveDeploy.xml
echo "(exit code $?)"
set -e

step "the nodes, as the Head sees them"
$BOREAS nodes

step "node localhost:$((BASE_PORT + 1)) holds only its slice (its local catalog, as update XML)"
.venv/bin/python - "http://localhost:$((BASE_PORT + 1))/catalog" <<'PY'
import sys, urllib.request
from lxml import etree
text = urllib.request.urlopen(sys.argv[1], timeout=5).read()
root = etree.fromstring(text)
print(f"<update version={root.get('version')!r} origin={root.get('origin')!r}>")
for el in root:
    print("  " + etree.tostring(el, encoding="unicode").split(">")[0] + ">" + (" ..." if len(el) else ""))
PY

step "the global catalog"
$BOREAS catalog show --head "$BOREAS_HEAD"

step "an m3 box: TPC-H Q3 kept incrementally as rows arrive, read where it runs with the query API"
$BOREAS submit examples/xml/tpch_q3.xml examples/xml/tpch_q3_deploy.xml
.venv/bin/python examples/demo_data.py q3-publish
echo "\$ boreas query q3 --agg sum --stable        # READ_STABLE of READ_SUM over every order"
$BOREAS query q3 --agg sum --stable
echo "\$ boreas query q3 _ 1995-02-17               # READ_SLICE: the orders placed on 1995-02-17"
$BOREAS query q3 _ 1995-02-17
echo "\$ boreas query q3 Revenue --agg max          # the largest revenue"
$BOREAS query q3 Revenue --agg max
.venv/bin/python examples/demo_data.py q3-check 2> >(grep -v -e WARN -e log4j -e setLogLevel >&2)

step "what the global component saw"
sleep 0.5
cat demo-watch.log

step "data: Spark publishes readings, the three nodes average them, Spark SQL cross-checks"
.venv/bin/python examples/demo_data.py 2> >(grep -v -e WARN -e log4j -e setLogLevel >&2)

step "the web UI: the live topology, served by the Head"
echo "open $BOREAS_HEAD/ in a browser (moves from the page ask for the token: $BOREAS_TOKEN)"
if [ -t 0 ] && [ -t 1 ]; then  # in a terminal: keep the cluster up to look at it
  echo "the cluster keeps running; press Ctrl-C to stop it"
  wait "${pids[-1]}" || true
fi
