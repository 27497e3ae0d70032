#!/bin/bash
# --verify-reads cost on the shared bench setup (g4m, 1200M, cold), one epoch each, interleaved
cd /work
F="--mem 1200M --epochs 1 --eval-every 0 --checkpoint-every 0 --model sage --layers 3 --hidden 256 --fanouts 10,10,10 --batch-size 1000 --eval-fanouts train --eval-max-nodes 5000 --json"
for S in gnndrive gids; do
  for vr in "" --verify-reads; do
    tag=$S${vr:+-vr}
    rm -rf /work/vr16/$tag
    /usr/bin/time -v /work/shared/tools/membudget --evict data/g4m 1200M -- /work/bin/tiergnn16 train data/g4m --strategy $S $F --out /work/vr16/$tag $vr > /work/vr16/$tag.json 2> /work/vr16/$tag.err
    echo "$tag rc=$?"
  done
done
