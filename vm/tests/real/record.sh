#!/usr/bin/env bash
# Records the real-model tapes the tests replay (vm/tests/real_model.rs): each program run on
# a real small model, every exchange kept with --record. Needs the local model
# (../shared/tools/local-llm.sh up, or LOCAL_LLM_BASE_URL and LOCAL_LLM_MODEL of another
# OpenAI-compatible server) and a built prosevm (PROSEVM, default target/debug/prosevm).
# Usage: vm/tests/real/record.sh [NAME...]   (default: every program; NAME as in tapes/)
# Prints each run's wall time and outcome; tapes go to vm/tests/real/tapes/NAME.tape.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
prosevm=${PROSEVM:-$root/target/debug/prosevm}
if [[ -z ${LOCAL_LLM_BASE_URL:-} ]]; then
  # shellcheck source=/dev/null
  source "$root/../shared/tools/local-llm.sh" && local_llm_up || exit 1
fi
export OPENAI_API_KEY=${OPENAI_API_KEY:-local}

# NAME SOURCE [FIXTURE...]: the program at SOURCE, run in a scratch directory holding the
# fixtures (name=content).
record() {
  local name=$1 src=$2; shift 2
  local dir; dir=$(mktemp -d)
  cp "$src" "$dir/"
  [[ -f $(dirname "$src")/prose.toml ]] && cp "$(dirname "$src")/prose.toml" "$dir/"
  local f
  for f in "$@"; do printf '%s' "${f#*=}" > "$dir/${f%%=*}"; done
  rm -f "$here/tapes/$name.tape"
  local start=$SECONDS
  (cd "$dir" && "$prosevm" run "$(basename "$src")" --driver openai \
      --base-url "$LOCAL_LLM_BASE_URL" --model "$LOCAL_LLM_MODEL" --no-input \
      --trace quiet --record "$here/tapes/$name.tape" > out.txt 2> err.txt)
  local code=$?
  printf '%-32s %4ds exit %d  %s\n' "$name" $((SECONDS - start)) "$code" \
    "$(head -c 100 "$dir/out.txt" | tr '\n' ' ')"
  [[ $code == 0 ]] || tail -n 3 "$dir/err.txt"
  rm -rf "$dir"
}

names=("$@")
sel() { [[ ${#names[@]} -eq 0 ]] || [[ " ${names[*]} " == *" $1 "* ]]; }

for n in 1 2 3; do
  sel "hello-$n" && record "hello-$n" "$root/examples/hello.prose"
done
for p in "$here"/published/*.prose; do
  n=$(basename "$p" .prose)
  sel "$n" && record "$n" "$p"
done
sel count-lines && record count-lines "$here/programs/count-lines.prose" \
  "notes.txt=apples
bananas
cherries
"
sel judgments && record judgments "$here/programs/judgments.prose"
sel long-answer && record long-answer "$here/programs/long-answer/long-answer.prose"
