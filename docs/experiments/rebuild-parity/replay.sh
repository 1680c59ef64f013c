#!/usr/bin/env bash
# usage: replay.sh CODE_DIR SMOKE_WS OUT_DIR -- `whoqa eval --data` on the three smoke books' real questions (6 Who) in a workspace of `whoqa reproduce smoke`: the served answers before and after a change
set -e
code=$1; ws=$2; out=$3
rm -rf ${REPLAY_DATA:-/tmp/replay-data}; mkdir -p ${REPLAY_DATA:-/tmp/replay-data}/books ${REPLAY_DATA:-/tmp/replay-data}/narrativeqa
head -1 ../shared/data/narrativeqa/documents.csv > ${REPLAY_DATA:-/tmp/replay-data}/narrativeqa/documents.csv
head -1 ../shared/data/narrativeqa/qaps.csv > ${REPLAY_DATA:-/tmp/replay-data}/narrativeqa/qaps.csv
for id in 09333c7d604bd412e6aef5d3e56b046ed301c5e5 2c5f448df18172babaac38806e1fb699a8baf65b 2dd593d19e201c9cf4edb0703cad0f525c1038a2; do
cp ../shared/data/books/$id.txt ${REPLAY_DATA:-/tmp/replay-data}/books/
grep "^$id" ../shared/data/narrativeqa/documents.csv >> ${REPLAY_DATA:-/tmp/replay-data}/narrativeqa/documents.csv
grep "^$id" ../shared/data/narrativeqa/qaps.csv >> ${REPLAY_DATA:-/tmp/replay-data}/narrativeqa/qaps.csv
done
rm -rf $ws/eval-data $ws/results/*@replay-data*
cd $code && ${PYTHON:-.venv/bin/python} cli.py eval --workspace $ws --data ${REPLAY_DATA:-/tmp/replay-data} > $out.log 2>&1
mkdir -p $out && cp $ws/results/*@replay-data* $out/
