#!/usr/bin/env bash
# Retrain the built-in models, regenerate the demo dataset and retrain the shipped light
# model, then rerun the benchmarks that the model cards and docs quote (issues 18, 28).
# Run from the repository root after merging: `bash scripts/retrain_builtin.sh [DATA] [WORK]`.
# DATA: the shared public data (default ../shared/data); WORK: scratch folder (default runs/retrain).
# Steps 0-2 fine-tune the anatomy and detector networks from the shipped weights and train the
# anomaly network from scratch (each model card gives its own command); SKIP_VISION=1
# skips them (the detector and the anomaly map read only images, so an anatomy change
# alone needs steps 0 and 3-7; step 5 then reuses the out-of-fold models of step 2b in WORK).
set -euo pipefail
DATA=${1:-../shared/data}
WORK=${2:-runs/retrain}
THREADS=${THREADS:-2}     # THREADS=1 on a machine shared with other jobs (no oversubscription)
LIGHT_STEPS=${LIGHT_STEPS:-6000}
LIGHT_SET="--set steps=$LIGHT_STEPS --set ensemble=2 --set calib_min_n_acc=0.95"
W=src/cxrils/weights
PY=${PYTHON:-python}
CX=${CXRILS:-cxrils}
mkdir -p "$WORK"
if [ "${SKIP_VISION:-0}" != 1 ]; then
  # 0. the anatomy network (visible and whole lungs, heart), fine-tuned from the shipped weights
  $CX train-anatomy --data "$DATA" -o "$WORK/anatomy.safetensors" --epochs 14 --lr 1e-3 \
      --init "$W/anatomy_builtin.safetensors" --threads "$THREADS" --max-minutes 95
  cp "$WORK/anatomy.safetensors" "$W/anatomy_builtin.safetensors"
  # 1-2. the detector and the anomaly map, each on its own half of the COVID-QU-Ex tuning part
  # (and of the JSRT nodule images, with synthetic lesions): the detector fine-tuned from the
  # shipped weights, the anomaly map from scratch (AnomalyTrainConfig's widths and epochs)
  $CX train-detector --data "$DATA" -o "$WORK/detector.safetensors" --epochs 6 --lr 1e-3 \
      --init "$W/detector_builtin.safetensors" --threads "$THREADS"
  cp "$WORK/detector.safetensors" "$W/detector_builtin.safetensors"
  $CX train-anomaly --data "$DATA" -o "$WORK/anomaly.safetensors" --threads "$THREADS"
  cp "$WORK/anomaly.safetensors" "$W/anomaly_builtin.safetensors"
  # 2b. out-of-fold lesion models, each on the other half, whose maps the light model trains
  # on (cxrils.training.prior_folds; not shipped): the anomaly map as above, the detector
  # from scratch and then fine-tuned twice (the shipped one has been fine-tuned several times)
  $CX train-anomaly --data "$DATA" --role detector -o "$WORK/oof_anomaly.safetensors" --threads "$THREADS"
  $CX train-detector --data "$DATA" --role anomaly -o "$WORK/oof_detector_r1.safetensors" --threads "$THREADS"
  for r in 2 3; do
    $CX train-detector --data "$DATA" --role anomaly --init "$WORK/oof_detector_r$((r - 1)).safetensors" \
        --epochs 12 --lr 1e-3 -o "$WORK/oof_detector_r$r.safetensors" --threads "$THREADS"
  done
  cp "$WORK/oof_detector_r3.safetensors" "$WORK/oof_detector.safetensors"
fi
# 3. the demo dataset with the new defaults (as `cxrils demo` does)
rm -rf "$WORK/demo"
$CX generate "$DATA/pairs/all_pairs.csv" -o "$WORK/demo" --workers 2 --no-progress
# 4. the light model's training data: demo records (held-back images out) + human-mask records
rm -rf "$WORK/light_data"
$PY -m cxrils.training.light_data --generated "$WORK/demo" --data "$DATA" -o "$WORK/light_data"
# 5. the light model (thresholds chosen on the validation split), then ship it
rm -rf "$WORK/light"
$CX train --model light --dataset "$WORK/light_data" -o "$WORK/light" $LIGHT_SET --threads "$THREADS" --no-evaluate \
    --set oof_anomaly_weights="$WORK/oof_anomaly.safetensors" --set oof_detector_weights="$WORK/oof_detector.safetensors"
# the cardiomegaly score gate is shipped only where its validation rule holds (exit 3 stops here;
# an inference setting: set "cardiomegaly_needs_score": false in $WORK/light/config.json, rerun from cp)
$PY -m benchmarks.light_cardiomegaly --run "$WORK/light" --dataset "$WORK/light_data" --out-of-fold
cp "$WORK/light/config.json" "$WORK/light/model.safetensors" "$WORK/light/train_summary.json" "$W/light_ils/"
# 6. the benchmarks quoted by the model cards and docs
$PY -m benchmarks.anatomy --data "$DATA" --publish anatomy
$PY -m benchmarks.lesion_models --data "$DATA" --publish lesion_models
$PY -m benchmarks.models --dataset "$WORK/light_data" --from-run "$W/light_ils" --work "$WORK/bench_models" \
    --publish light_model
$PY -m benchmarks.human_masks --data "$DATA" --publish human_masks
$PY -m benchmarks.light_cardiomegaly --dataset "$WORK/light_data" --out-of-fold --publish light_cardiomegaly
$PY -m benchmarks.light_prior_shift --dataset "$WORK/light_data" --out-of-fold --publish light_prior_shift
$PY -m benchmarks.light_members --run "$WORK/light" --dataset "$WORK/light_data" --publish light_members
$PY -m benchmarks.human_masks --data "$DATA" --set grounding.c1_bilateral=union --publish human_masks_c1_union
$PY -m benchmarks.grounding --data "$DATA" --publish grounding
# benchmarks of other pages whose numbers depend on the builtin lesion models
$PY -m benchmarks.generate --data "$DATA" --workers 1,2 --publish generate
$PY -m benchmarks.cost_model --data "$DATA" --images 30 --radedit-evals 2 --publish cost_model
$PY -m benchmarks.plausibility --data "$DATA" --publish plausibility
$PY -m benchmarks.serve --image "$DATA/nih_bbox/images/00001369_000.png" --publish serve
# 7. copy the results into the docs and model cards
$PY scripts/sync_results.py
