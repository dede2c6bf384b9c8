#!/usr/bin/env bash
# Runs the README walk-through: every command of README.md's ```sh blocks from
# "## A cluster" up to "## Layout", in order, as a reader would type them, and
# fails on the first one that fails (its exit code, or a background command
# that died), or whose result is wrong: the example readings must come out of
# the sensor chain as averages, and the partitioned Q3 view must equal the
# one-node box's view, before and after each layout change, stable read too.
# It is part of `make test` (tests/test_readme_walkthrough.py).
#
# So that it never touches a cluster or catalog of yours, it runs in a fresh
# temporary directory (a copy of examples/, tests/data linked) on free ports:
# the README's default ports are rewritten in each command (14000 -> a free Head
# port, 15000.. -> free node ports, 30000 -> a free region port, also in the
# copied deployment files), `boreas cluster up` and `boreas head` are given
# those ports, /var/lib/boreas becomes a directory in the temporary one, and
# curl is told to fail on HTTP errors.  What the reader does by hand is done
# here: `cluster up` runs in the background and its export line is pasted; a
# command started with `&` is waited for (the Head answers, the node
# registered, the region listens) before the next one runs.
#
# Usage: examples/readme_walkthrough.sh [README]   (WALKTHROUGH_KEEP=1 keeps the directory)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
README=${1:-$REPO/README.md}
PY=$REPO/.venv/bin/python
[ -x "$PY" ] || PY=python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/boreas-walkthrough.XXXXXX")

read -r HEAD_PORT BASE_PORT REGION_PORT < <("$PY" - <<'PY'
import random, socket

def free(ports):
    held = []
    try:
        for port in ports:
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in held:
            s.close()

for _ in range(500):
    head, base, region = (random.randrange(20000, 60000) for _ in range(3))
    ports = [head, region, *range(base, base + 10)]
    if len(set(ports)) == len(ports) and free(ports):
        print(head, base, region)
        break
PY
)
[ -n "${REGION_PORT:-}" ] || { echo "no free ports found" >&2; exit 1; }

cluster_pid=""
bg_pids=()
bg_cmds=()
bg_logs=()
cleanup() {
  local code=$?
  set +e
  for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null; done
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -TERM "$cluster_pid"; wait "$cluster_pid" 2>/dev/null  # it stops its Head and nodes
  fi
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null; done
  if [ "$code" != 0 ] || [ -n "${WALKTHROUGH_KEEP:-}" ]; then
    echo "walk-through directory kept: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$code"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

cp -r "$REPO/examples" "$WORK/examples"
sed -i "s/:30000\"/:$REGION_PORT\"/g" "$WORK"/examples/xml/*.xml
mkdir -p "$WORK/tests"
ln -s "$REPO/tests/data" "$WORK/tests/data"
ln -s "$REPO/.venv" "$WORK/.venv"
cd "$WORK"
unset BOREAS_HEAD BOREAS_TOKEN BOREAS_CATALOG

# The commands, NUL-separated, each as KIND<TAB>COMMAND: cluster (boreas cluster up),
# bg (ended with &, given without it), fg.
"$PY" - "$README" "$HEAD_PORT" "$BASE_PORT" "$REGION_PORT" "$WORK" > commands <<'PY'
import re, sys

readme, head, base, region, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
text = open(readme).read()
text = text[text.index("\n## A cluster"):text.index("\n## Layout")]
blocks = re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)

def ports(cmd):
    cmd = re.sub(r"(?<![0-9])14000(?![0-9])", str(head), cmd)
    cmd = re.sub(r"(?<![0-9])1500([0-9])(?![0-9])", lambda m: str(base + int(m.group(1))), cmd)
    cmd = re.sub(r"(?<![0-9])30000(?![0-9])", str(region), cmd)
    cmd = cmd.replace("/var/lib/boreas", f"{work}/var")
    if re.match(r"boreas cluster up\b", cmd) and "--head-port" not in cmd:
        cmd = re.sub(r"boreas cluster up", f"boreas cluster up --head-port {head} --base-port {base}", cmd, 1)
    if re.match(r"boreas head\b", cmd) and "--listen" not in cmd:
        cmd = re.sub(r"boreas head", f"boreas head --listen localhost:{head}", cmd, 1)
    return re.sub(r"^curl ", "curl -fsS ", cmd)

out = []
for block in blocks:
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        heredoc = re.search(r"<<-?'?(\w+)'?", line)
        if heredoc:
            body = [line]
            while i < len(lines):
                body.append(lines[i])
                i += 1
                if lines[i - 1].strip() == heredoc.group(1):
                    break
            out.append(("fg", ports("\n".join(body))))
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i]
            i += 1
        background = re.match(r"^(.*?)\s+&\s*(#.*)?$", line)
        if re.match(r"boreas cluster up\b", line):
            out.append(("cluster", ports(line)))
        elif background:
            out.append(("bg", ports(background.group(1))))
        else:
            out.append(("fg", ports(line)))
sys.stdout.write("".join(f"{kind}\t{cmd}\0" for kind, cmd in out))
PY

export PATH="$REPO/.venv/bin:$PATH"
STEP=0

fail() {
  echo >&2
  echo "walk-through FAILED at step $STEP: $*" >&2
  exit 1
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.2
  done
}

http_ok() { curl -fsS -o /dev/null --max-time 2 "$1"; }

node_registered() {  # node_registered HOST:PORT: the Head lists it, alive
  curl -fsS --max-time 2 "$BOREAS_HEAD/nodes" | "$PY" -c '
import json, sys
rows = json.load(sys.stdin)["nodes"]
sys.exit(0 if any(r["endpoint"] == sys.argv[1] and r["alive"] for r in rows) else 1)' "$1"
}

check_background() {
  local i
  for i in "${!bg_pids[@]}"; do
    if ! kill -0 "${bg_pids[$i]}" 2>/dev/null; then
      wait "${bg_pids[$i]}" 2>/dev/null && code=0 || code=$?
      echo "--- its output (${bg_logs[$i]}):" >&2
      cat "${bg_logs[$i]}" >&2
      fail "the background command '${bg_cmds[$i]}' exited (code $code)"
    fi
  done
}

start_cluster() {
  # A cluster stopped by `boreas cluster down` may still be writing its last lines: wait until it has exited
  # (up to 60 s), and give each start its own files, so that no old writer lands in the new log.
  local deadline=$((SECONDS + 60))
  while [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  local log="cluster-$STEP.log" err="cluster-$STEP.err"
  eval "exec $1" > "$log" 2> "$err" < /dev/null &  # exec: $! is boreas itself
  cluster_pid=$!
  deadline=$((SECONDS + 90))
  until grep -q "press Ctrl-C" "$log" 2>/dev/null; do
    if ! kill -0 "$cluster_pid" 2>/dev/null; then
      cat "$log" "$err" >&2
      fail "boreas cluster up exited"
    fi
    [ $SECONDS -lt $deadline ] || { cat "$err" >&2; fail "boreas cluster up not ready after 90s"; }
    sleep 0.2
  done
  cat "$log"
  local line
  line=$(grep -a '^export BOREAS_HEAD=' "$log") || fail "no export line in the output of boreas cluster up"
  echo "\$ $line      # pasted, as the README says"
  eval "$line"
}

start_background() {
  local log="bg-$STEP.log"
  eval "exec $1" > "$log" 2>&1 < /dev/null &  # exec: $! is the command itself, so kill stops it
  bg_pids+=($!)
  bg_cmds+=("$1")
  bg_logs+=("$log")
  case "$1" in
    "boreas head"*)
      wait_for 60 "the Head to answer" http_ok "$BOREAS_HEAD/status" ;;
    "boreas node"*)
      local endpoint
      endpoint=$(sed -E 's/.*--endpoint ([^ ]+).*/\1/' <<< "$1")
      wait_for 60 "node $endpoint to register" node_registered "$endpoint" ;;
    "boreas region"*)
      local endpoint
      endpoint=$(sed -E 's/.*--endpoint ([^ ]+).*/\1/' <<< "$1")
      wait_for 60 "the region at $endpoint to answer" http_ok "http://$endpoint/status"
      sleep 1 ;;  # it registers with the Head and reads its nodes' reflections
    "boreas watch"*)
      wait_for 30 "the watcher's first full copy" grep -q "full copy" "$log" ;;
    *)
      sleep 1 ;;
  esac
  check_background
}

# The Q3 view as the checks compare it: rows sorted, values rounded (a partitioned box adds them up
# in another order), a stable read's first line (its epoch) left out.
q3_normal() {
  "$PY" -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin]
print(json.dumps(sorted((r["key"], round(r["value"], 6)) for r in rows if "key" in r)))'
}

q3_view() { boreas query q3 "$@" --json | q3_normal; }

q3_settled() {  # the one-node view, non-empty and as the last read found it: kept in q3-view.json
  local view
  view=$(q3_view) || return 1
  [ "$view" != "[]" ] && [ "$view" = "$(cat q3-view.json)" ] && return 0
  echo "$view" > q3-view.json
  return 1
}

q3_same() { [ "$(q3_view "$@")" = "$(cat q3-view.json)" ]; }

q3_rows() { "$PY" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' q3-view.json; }

echo "README walk-through in $WORK: Head port $HEAD_PORT, nodes from $BASE_PORT, region port $REGION_PORT"
while IFS=$'\t' read -r -d '' kind cmd <&3; do
  STEP=$((STEP + 1))
  printf '\n\033[1m[%d] $ %s%s\033[0m\n' "$STEP" "$cmd" "$([ "$kind" = bg ] && echo ' &')"
  check_background
  case "$kind" in
    cluster) start_cluster "$cmd" ;;
    bg) start_background "$cmd" ;;
    fg)
      code=0
      out="out-$STEP.txt"
      eval "$cmd" < /dev/null > "$out" || code=$?
      cat "$out"
      [ "$code" = 0 ] || fail "exit code $code"
      case "$(sed -E 's/[[:space:]]+#( .*)?$//' <<< "$cmd")" in  # without its comment
        "boreas query q3")  # the Q3 view: kept from the one-node box, the partitioned one must equal it
          head -n 1 "$out" | grep -Eq '^ *l_orderkey +o_orderdate +o_shippriority +revenue$' ||
            fail "the table's header does not name the key and value columns"
          if [ ! -s q3-view.json ]; then
            q3_view > q3-view.json
            wait_for 30 "the Q3 view to settle" q3_settled
            echo "(the view: $(q3_rows) rows)"
          else
            q3_same || wait_for 30 "the partitioned view to equal the one-node box's" q3_same
            echo "(the same $(q3_rows) rows as the one-node box's view)"
          fi ;;
        "boreas query q3 --stable")
          head -n 1 "$out" | grep -Eq '^stable epoch [0-9]+' || fail "the stable read did not say its epoch first"
          boreas query q3 --stable --json | head -n 1 | grep -Eq '^\{"epoch": [0-9]+, "age": ' ||
            fail "the stable read printed no epoch line first (--json)"
          q3_same --stable || wait_for 30 "the stable view to equal the one-node box's" q3_same --stable
          echo "(the stable read has the same $(q3_rows) rows as the one-node box's view)" ;;
        "boreas segments q3")  # every layout holds the same entries
          total=$(tail -n 1 "$out" | sed -nE 's/^layout [0-9]+, 3 members, [0-9]+ segments, ([1-9][0-9,]*) entries$/\1/p')
          [ -n "$total" ] || fail "no total line with 3 members and some entries"
          [ -z "${q3_entries:-}" ] || [ "$total" = "$q3_entries" ] || fail "$total entries, $q3_entries before"
          q3_entries=$total ;;
        "boreas move q3/"* | "boreas split q3/"* | "boreas rebalance q3"*)  # a new layout, the view exact
          grep -Eq '^box q3: layout [0-9]+, [0-9]+ segments; ' "$out" || fail "no new layout of q3"
          wait_for 30 "the view to stay equal to the one-node box's" q3_same
          echo "(the view still equals the one-node box's)" ;;
        "boreas submit --replace sensor_chain.xml")  # the edited filter replaced, the aggregate kept
          grep -q "changed: box valid" "$out" && grep -Eq "kept: boxes .*per_sensor" "$out" ||
            fail "the replace did not say valid changed and per_sensor was kept" ;;
        "boreas publish Reading"*)  # the example data must come out of the chain as averages
          log=""
          for i in "${!bg_cmds[@]}"; do  # what it prints, or the file it writes (--output)
            [[ ${bg_cmds[$i]} == "boreas subscribe Average"* ]] && log=${bg_logs[$i]}
            [[ ${bg_cmds[$i]} == "boreas subscribe Average"*"--output "* ]] &&
              log=$(sed -E 's/.*--output ([^ ]+).*/\1/' <<< "${bg_cmds[$i]}")
          done
          [ -n "$log" ] || fail "no subscriber of Average runs"
          wait_for 30 "averages at the subscriber" grep -q '"fahrenheit"' "$log"
          sleep 1
          echo "(the subscriber printed $(grep -c '"fahrenheit"' "$log") averages so far)" ;;
        "boreas cluster down"*)  # what ran against that cluster goes with it
          for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
          for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
          bg_pids=(); bg_cmds=(); bg_logs=()
          wait "$cluster_pid" 2>/dev/null || fail "boreas cluster up exited with an error"
          cluster_pid="" ;;
      esac ;;
  esac
done 3< commands
check_background
echo
echo "README walk-through: all $STEP commands succeeded"
