#!/usr/bin/env bash
# The demo behind `make demo`: validate the examples, apply them one by one to
# an embedded catalog, extend a running topology, show a refused submission,
# and print the catalog.  Safe to run again: it starts from a fresh catalog.
set -euo pipefail
cd "$(dirname "$0")/.."
BOREAS=.venv/bin/boreas
export BOREAS_CATALOG="sqlite:///$PWD/demo-catalog.db"
BOREALIS_CATALOG="sqlite:///$PWD/demo-borealis.db"
rm -f demo-catalog.db* demo-borealis.db*

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "validate each example (application + deployment)"
for app in packet_aggregate sensor_chain trade_join; do
  $BOREAS validate "examples/xml/$app.xml" "examples/xml/${app}_deploy.xml"
done

step "apply them to the embedded catalog $BOREAS_CATALOG"
for app in packet_aggregate sensor_chain trade_join; do
  $BOREAS catalog apply "examples/xml/$app.xml" "examples/xml/${app}_deploy.xml"
done

step "a bad submission is refused with every reason, and changes nothing"
set +e
$BOREAS catalog apply tests/data/borealis/move_Move.xml tests/data/borealis/move_MoveDeploy.xml
echo "(exit code $?)"
set -e

step "the global catalog"
$BOREAS catalog show

step "the original Borealis test, in its own catalog: deploy a filter, then extend it"
$BOREAS catalog apply --catalog "$BOREALIS_CATALOG" \
  tests/data/borealis/deploy_Deploy.xml tests/data/borealis/deploy_DeployDeploy.xml
$BOREAS catalog apply --catalog "$BOREALIS_CATALOG" \
  tests/data/borealis/deploy_Add.xml tests/data/borealis/deploy_AddDeploy.xml
$BOREAS catalog show --catalog "$BOREALIS_CATALOG"
