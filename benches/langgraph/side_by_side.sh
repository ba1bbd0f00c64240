#!/usr/bin/env bash
# prosevm and LangGraph running the same workflows, whole process, side by side:
# `prosevm exec` of each compiled program with the default durable store and the mock
# driver, and `workflows.py` with LangChain's fake chat model. Needs hyperfine and Python 3
# with the packages of requirements.txt (`python3 -m venv V && V/bin/pip install -r
# requirements.txt`, then PYTHON=V/bin/python). Writes hyperfine's JSON to OUT.
#
#   cargo build --release -p prosec -p prosevm
#   PYTHON=V/bin/python benches/langgraph/side_by_side.sh [OUT]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-/tmp/side-by-side}"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cargo run -q --release --manifest-path "$root/Cargo.toml" -p prose-benches \
  --example write_programs -- "$work" >/dev/null
vm="$root/target/release/prosevm"
runs=()
for name in one chain-2000 chain-5000 chain-20000 fan-2000 fan-5000 fan-20000; do
  "$root/target/release/prosec" build "$work/$name.prose" -o "$work/$name.pbc" >/dev/null
  runs+=("$vm exec $work/$name.pbc --trace quiet --state-dir $work/state")
done
hyperfine -N -w 3 -r 30 --prepare "rm -rf $work/state" --export-json "$out/prosevm.json" "${runs[@]}"
lg="$root/benches/langgraph/workflows.py"
hyperfine -N -w 1 -r "${LANGGRAPH_RUNS:-5}" --export-json "$out/langgraph.json" \
  "$python $lg chain 0" "$python $lg chain 2000" "$python $lg chain 5000" \
  "$python $lg fan 2000" "$python $lg fan 5000"
