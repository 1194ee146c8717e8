#!/usr/bin/env bash
# Reproduce TSCIL Table 3 rows (Qiao et al., KDD 2024) on the real data in ../shared/data.
# Each cell is one full-protocol run (100 epochs per task, early stopping, class order and
# seed 1234 + run). Finished cells are kept in the results folders, so rerunning resumes.
#   bash benchmarks/reproduce_tscil.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/env.sh
runs=${1:-1}
data=${CLESTIM_SHARED_DATA:-../shared/data}
methods=Naive,Offline,LwF,MAS,EWC,DT2W,ER,DER,DERpp,Herding,ASER,CLOPS,GR
for norm in layer batch; do
  clestim bench --datasets uci_har,dsa --data-home "$data" --methods "$methods" \
    --norm "$norm" --runs "$runs" --set LwF.lambda_kd=10000 \
    --results "benchmarks/results/tscil_$norm" --no-progress
  clestim report "benchmarks/results/tscil_$norm"
done
