#!/bin/bash
# Issue 55 defect 0 (docs/reproductions.md, run H): the main job's training stages under fold/trial seeds 14 and 15,
# from the same prepared books as a `whoqa reproduce main` run (WS: a copy of its workspace taken before its
# `eval --data` step; SPLIT: its split folder). Writes WS/results/ (cross-validated and averaged, each seed's own
# run) and WS/results/final-seedN@unseen.json (each seed's --final ensemble on the unseen books).
#   bash docs/experiments/seed-spread/seeds.sh WS SPLIT
set -e
W=$1 SPLIT=$2
for s in 14 15; do
  whoqa pretrain --workspace "$W" --seed $s --name pretrain-seed$s
  whoqa train --workspace "$W" --folds 10 --from-pretrained --pretrained pretrain-seed$s --seed $s
done
whoqa eval --workspace "$W"
for s in 14 15; do
  whoqa train --workspace "$W" --final --from-pretrained --pretrained pretrain-seed$s --seed $s
  whoqa eval --workspace "$W" --data "$SPLIT/unseen" --kinds who
  cp "$W/results/final:memnet+pretrain+salience[bm25f]@unseen.json" "$W/results/final-seed$s@unseen.json"
done
