#!/bin/sh
# The strategy-seam issue's "no strategy slower": the shared bench (docs/STRATEGIES.md) of each
# strategy with the build before the seam work and the build after, one right after the other on
# the same machine, strategy by strategy (so the machine's drift falls on both alike).
#   [EPOCHS=2] [REPS=1] bench/seam/before_after.sh BEFORE_EXE AFTER_EXE OUTDIR [STRATEGY ...]
# Run from the repository root; data/g4m must exist (bench/README.md "Ginex (issue 9)").
set -eu
before=$1 after=$2 out=$3
shift 3
strategies=${*:-hier diskgnn:disk-budget=4G ginex gids gnndrive pagraph mmap}
epochs=${EPOCHS:-2} reps=${REPS:-1}
mkdir -p "$out"
for s in $strategies; do
  rep=1
  while [ "$rep" -le "$reps" ]; do
    for b in before after; do
      exe=$before
      [ $b = after ] && exe=$after
      dir=$out/$b-$(echo "$s" | tr ':=' '__')
      [ "$reps" = 1 ] || dir=$dir-$rep
      echo "== $(date +%T) $s $b $rep (load $(cut -d' ' -f1-3 /proc/loadavg))" >>"$out/log.txt"
      "$exe" bench data/g4m --mem 1200M --strategies "$s" --epochs "$epochs" --out "$dir" \
        --overwrite --model sage --layers 3 --hidden 256 --fanouts 10,10,10 --batch-size 1000 \
        --eval-fanouts train -- --eval-max-nodes 5000 >>"$out/log.txt" 2>&1 ||
        echo "== FAILED $s $b" >>"$out/log.txt"
    done
    rep=$((rep + 1))
  done
done
echo "== $(date +%T) done" >>"$out/log.txt"
