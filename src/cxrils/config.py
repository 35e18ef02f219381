"""Configuration: the paper's thresholds and the backend choices, as dataclasses.

Every threshold of the paper lives here with its source. A configuration loads
from TOML (:func:`load_config`) and takes ``section.key=value`` overrides
(:func:`apply_overrides`), which is what ``--config`` and ``--set`` do on the
command line; ``cxrils config show`` prints the effective configuration. Sections
may nest (``[pipeline.ray.anomaly]`` in TOML, ``pipeline.ray.anomaly.num_gpus=1``
with ``--set``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


#: Loss weights of ROSALIA / LISA training (paper section 5, "Loss function"):
#: L = LAMBDA_TXT * L_txt + LAMBDA_BCE * L_bce + LAMBDA_DICE * L_dice (Dice on positives only).
LAMBDA_TXT = 0.5
LAMBDA_BCE = 5.0
LAMBDA_DICE = 1.0
#: Cardiothoracic ratio above which a heart is enlarged on a PA film: the radiological
#: definition of cardiomegaly, the cut-off the paper's Appendix D.3 names beside its 0.45
#: negative rule (QCConfig.ctr_max_cardiomegaly_negative). Used where the CTR is taken as
#: the answer: the JSRT records built from the radiologists' SCR masks and the light model's
#: cardiomegaly answer (LightConfig.cardiomegaly_min_ctr).
CTR_MIN_CARDIOMEGALY = 0.5


class ConfigError(ValueError):
    """Raised for an unknown key, a value of the wrong type, or an unreadable file."""


@dataclass
class GroundingConfig:
    """Algorithm 1 thresholds (paper Table 7, Appendix A.4). Ratios in [0, 1]."""

    tau_anatomy: float = 0.25  # c1: IoU(box, M_union) >= tau_anatomy (Table 7)
    tau_conf: float = 0.20  # c2: box confidence (Table 7)
    tau_conf_edema: float = 0.01  # c2 for edema (Table 7)
    tau_signal: float = 0.20  # c3: |B ∩ A| / |B| (Table 7)
    tau_size: float = 0.10  # c4: IoU(box, right or left lung) (Table 7)
    tau_ano: float = 0.10  # A = x_ano >= tau_ano (Table 7)
    tau_ano_edema: float = 0.01  # tau_ano for edema (Table 7)
    # Connected components of A (FindIntersectingComponent) and the expansion's steps:
    # 8 (diagonal neighbours join) or 4; the paper does not say (ours).
    connectivity: int = 8
    # Refinement (Appendix A.5 names the operations, not their sizes: ours).
    # Pixel sizes below are at this longest image side and scale with the image (ours).
    reference_size_px: int = 512
    open_radius_px: int = 2  # erosion then dilation radius, pixels at 512 px
    grow_intensity_tol: float = 0.06  # expansion: |x - mean(component)| / 255 below this
    grow_iterations: int = 3  # dilation steps of the similar-intensity expansion
    effusion_base_fraction: float = 0.25  # lower part of the lung mask added for basal effusion
    # Effusion only (ours): the lung base a whole-lung mask holds and the visible lung does
    # not (lung hidden by fluid, away from the heart) joins A, as RadEdit's healthy
    # counterfactual would restore that lung; a part under this share of the lung is a
    # segmentation sliver. Needs an anatomy backend giving both lungs (builtin).
    effusion_hidden_base: bool = True
    effusion_hidden_min_fraction: float = 0.02
    # Empty locations overlap no reported anatomy mask "at all" (section 3.1 step 4): 0 pixels.
    empty_overlap_tol_px: int = 0
    # Ours: nor any generated lesion mask of a positive finding (also within
    # empty_overlap_tol_px). A lesion's connected component can spread past the locations
    # the report names; "There is no X in <zone>" must not be said of a zone a mask of
    # the same image covers (second new-user trial: 17 such negatives in the demo).
    empty_excludes_lesion_masks: bool = True
    # c1 when the reported locations lie in both lungs (one of C1_BILATERAL). "union": the
    # paper's IoU(B, M_union) >= tau_anatomy (Algorithm 1); set it to reproduce the paper.
    # "per_lung" (the default; ours, a departure from the paper, docs/grounding.md): the box
    # also passes when its IoU with the right-side part or the left-side part of the
    # reported locations reaches tau_anatomy, so a box over one lung of a bilateral finding
    # is not measured against both lungs (with the paper's rule, boxes over the smaller left
    # lung rarely pass; chosen on the COVID-QU-Ex tuning part by the table "c1 with the
    # experts' own boxes and lungs" of benchmarks/human_masks.py).
    c1_bilateral: str = "per_lung"

    def tau_conf_for(self, lesion_type: str) -> float:
        """tau_conf for a lesion type (edema has its own, Table 7)."""
        return self.tau_conf_edema if lesion_type == "edema" else self.tau_conf

    def tau_ano_for(self, lesion_type: str) -> float:
        """tau_ano for a lesion type (edema has its own, Table 7)."""
        return self.tau_ano_edema if lesion_type == "edema" else self.tau_ano


@dataclass
class QCConfig:
    """Quality control (paper Appendix D)."""

    ctr_max_cardiomegaly_negative: float = 0.45  # Appendix D.3
    # A reported cardiomegaly whose CTR (anatomy) is at or below this gets no positive
    # record: the heart mask shows no enlargement, the same rule Appendix D.3 applies to
    # negatives, turned round (ours).
    ctr_min_cardiomegaly_positive: float = 0.45
    frontal_only: bool = True  # Appendix D.1: PA and AP only
    # Appendix D.2 names the checks but not the tolerances: ours, as a fraction of width/height.
    crosscheck_lung_x_tol: float = 0.05
    crosscheck_heart_y_tol: float = 0.05
    # Frontal-view plausibility of the anatomy (ours: the paper gives none). An image whose
    # organs fail it (e.g. a lateral image without a view, segmented as if frontal) is
    # excluded, so it never yields records or a cardiomegaly negative. Bounds: the range
    # of each measure over the JSRT SCR human masks (247 PA images), widened; every JSRT
    # annotation passes, the four IU lateral images fail (benchmarks/plausibility.py,
    # docs/results/plausibility.md, docs/pipeline.md).
    frontal_plausibility: bool = True
    plausible_lung_area_min_fraction: float = 0.02  # each lung, of the image's pixels
    plausible_lung_area_max_fraction: float = 0.40
    plausible_lung_balance_min_fraction: float = 0.25  # smaller lung area / larger
    plausible_lung_overlap_min_fraction: float = 0.50  # shared rows / rows of the shorter lung
    # shared columns / columns of the narrower lung: 0 on all 247 JSRT human masks and on
    # the builtin anatomy of all 391 public frontal pairs, about 0.25 on the IU laterals
    plausible_lung_column_overlap_max_fraction: float = 0.10
    plausible_heart_area_min_fraction: float = 0.02
    ctr_plausible_min: float = 0.30  # a lower CTR is a failed heart mask, not a small heart
    ctr_plausible_max: float = 0.85


@dataclass
class AnatomyConfig:
    """Builtin anatomy backend: geometric lung zones and lobes (ours; docs/anatomy.md).

    Fractions are of each lung's own height, measured from its apex (topmost row, 0)
    to its base (lowest row, 1). They approximate CXAS's learned regions; the paper
    (section 3.1 step 2) takes zones and lobes from CXAS itself.
    """

    zone_apical_end: float = 0.15  # apical zone: apex .. 0.15 (ours)
    zone_upper_end: float = 0.40  # upper zone: 0.15 .. 0.40 (ours)
    zone_mid_end: float = 0.70  # mid zone: 0.40 .. 0.70; lung base below (ours)
    right_horizontal_fissure: float = 0.40  # right upper lobe above this level (ours)
    left_upper_lobe_end: float = 0.50  # left upper lobe above this level, lingula below (ours)
    lower_lobe_start: float = 0.80  # below this level all of a lung is lower lobe (ours)
    medial_fraction: float = 0.50  # medial share of a row given to middle lobe / lingula (ours)
    threshold: float = 0.5  # sigmoid probability for a builtin lung mask pixel (ours)
    # builtin heart mask pixel (ours). With the previous, smaller network 0.85 scored better
    # on JSRT validation but shrank the heart of an opaque COVID-19 image to CTR 0.14: an
    # underestimated CTR would let enlarged hearts pass the <= 0.45 cardiomegaly-negative
    # rule, so the safer 0.5 is the default (docs/anatomy.md; the shipped network meets
    # its heart targets at 0.5).
    heart_threshold: float = 0.5
    # CLAHE of the builtin network's input (ours; JSRT images are low contrast). The shipped
    # weights were trained with these values (training/anatomy_train.py): change them only
    # together with retrained weights.
    clahe_clip_limit: float = 2.0
    clahe_tile_grid: int = 8  # tiles per side of the scaled image
    # cxas backend: sigmoid threshold of a CXAS label's probability (CXAS BackboneUNet.threshold,
    # cxas 0.0.20 models/UNet/backbone_unet.py).
    cxas_threshold: float = 0.5


@dataclass
class InstructionConfig:
    """Instruction generation (paper section 3.2, Appendix C)."""

    seed: int = 0
    max_absent_negatives_per_type: int = 1  # Appendix C.2: at most one per type per study
    # Share of absent-type negatives that are global; the rest are basic at a location drawn
    # uniformly from both lungs together and the ten instruction locations. 1/12: a uniform
    # draw over global, both lungs and the ten locations, as the authors' released test sheet
    # has it (final_sheet/absence_final.csv at e38fdb2: global and both-lungs negatives in
    # equal numbers, and rare; Table 12: 796 global of 9,112 basic and global negatives).
    absent_negative_global_prob: float = 1 / 12
    # Appendix C.2: a present type gets a basic negative at "one of the empty locations".
    max_empty_location_negatives_per_type: int = 1
    # Chance that an opacity negative at one place (a zone or one lung; absent or empty
    # location) is asked in the lesion-inference form ("Segment the opacity in the left
    # lung base and predict its type." / "There is no opacity in the left lung base.")
    # instead of the basic one. The paper gives no rule (Table 12: 769 lesion-inference
    # negatives of 9,881). The authors' released test sheet (final_sheet/absence_final.csv
    # at e38fdb2) gives one opacity negative per study, never both forms: 784 of the 1,593
    # at one place are lesion inference, 809 basic (0.49).
    lesion_inference_negative_prob: float = 0.5
    paraphrase: bool = False  # Appendix C.3, off by default
    paraphrase_variants_per_persona: int = 3  # Appendix C.3: nine variants for three personas
    # A paraphrase line longer than this many characters is dropped (ours: a rambling reply,
    # not an instruction; the longest template instruction has under 120 characters).
    paraphrase_max_chars: int = 400


@dataclass
class BackendConfig:
    """Which implementation serves each model-backed stage, and their local weights."""

    report_structurer: str = "rules"  # rules | llm
    location_mapper: str = "lexicon"  # lexicon | llm
    anatomy: str = "builtin"  # builtin | cxas | hybridgnet
    anomaly: str = "builtin"  # builtin | atlas | radedit
    detector: str = "builtin"  # builtin | onnx
    # Segmenter of x whose lungs + heart are the anomaly mapper's edit region; the paper
    # uses HybridGNet here (section 3.1 step 2) and CXAS for the location masks. "" = anatomy.
    anatomy_edit_region: str = ""
    # Location masks from x_hat (Appendix A.3: CXAS on the RadEdit image): yes | no | auto
    # (auto = only when anomaly is "radedit", whose x_hat is a realistic radiograph).
    anatomy_on_x_hat: str = "auto"
    # Local paths; nothing is downloaded at run time.
    cxas_weights: str = ""
    hybridgnet_weights: str = ""
    hybridgnet_dir: str = ""  # the user's clone of HybridGNet (GPL code, not vendored)
    radedit_dir: str = ""
    onnx_detector: str = ""
    # LLM backend: an OpenAI-compatible server on the user's machine, or a local model dir.
    # These shared keys serve every LLM use (also instruction paraphrasing); the
    # llm_structure_* and llm_locations_* keys below override them per task.
    llm_base_url: str = ""
    llm_model: str = ""
    llm_model_path: str = ""
    llm_gguf_file: str = ""  # a GGUF file inside llm_model_path (transformers dequantises it)
    # Report structuring (paper section 3.1 step 1: Mistral-Small-3.1-24B-Instruct-2503).
    # Where the model runs (base_url, else model_path + gguf_file) falls back to the shared
    # keys as a whole when both llm_structure_base_url and llm_structure_model_path are
    # empty; the model name falls back to llm_model on its own.
    llm_structure_base_url: str = ""
    llm_structure_model: str = ""
    llm_structure_model_path: str = ""
    llm_structure_gguf_file: str = ""
    # Location mapping (paper section 3.1 step 1, Appendix A.2: medgemma-27b-text-it); same fallback.
    llm_locations_base_url: str = ""
    llm_locations_model: str = ""
    llm_locations_model_path: str = ""
    llm_locations_gguf_file: str = ""
    llm_allow_remote: bool = False  # refuse non-local servers: report text must not leave the site (Appendix A.2)
    llm_max_tokens: int = 2048  # answer budget; hitting it is an error, never a shorter answer (ours)
    llm_max_retries: int = 2  # re-asks after an invalid answer (ours)
    llm_concurrency: int = 4  # requests in flight (ours)
    llm_timeout_s: float = 120.0  # per request (ours)
    llm_cache_dir: str = ""  # answers cached by report hash ("" = in memory only)
    # Arithmetic of the torch-backed image adapters (radedit, cxas, hybridgnet) on CUDA:
    # fp32 | fp16 | bf16 (autocast). CPU always computes in fp32. Changes their outputs.
    precision: str = "fp32"


#: Values of ``report.differential_certainty``.
DIFFERENTIAL_CERTAINTIES = ("tentative", "definitive")
#: Values of ``io.voi`` (how a DICOM's stored values become grey levels, docs/io.md).
VOI_CHOICE = re.compile(r"auto|minmax|(lut|window)(:\d+)?")
#: ``split.by`` values: what a hash split keeps together.
SPLIT_BY: tuple[str, ...] = ("patient", "study")


@dataclass
class ReportConfig:
    """Report structuring by the ``rules`` backend (paper section 3.1 step 1; docs/report.md)."""

    # Certainty of each item of a differential list ("atelectasis versus pneumonia",
    # "effusion or atelectasis", "atelectasis/scarring"). "tentative" (default): the paper's
    # certainty rule (uncertainty expressed -> tentative, section 3.1), so a basic instruction
    # names the finding "opacity" and its lesion-inference answer says "possibly reflects".
    # "definitive": the reading of NLM's MeSH indexers, who index listed alternatives
    # (benchmarks/report_mesh.py prints both). Possibility cues ("may", "cannot exclude")
    # are tentative either way. Used by `cxrils structure` and the benchmark alike.
    differential_certainty: str = "tentative"
    # A "sentence" longer than this many tokens is cut into pieces of at most this length,
    # so that the work per sentence stays bounded on unpunctuated text (ours; sentences of
    # the IU reports have far fewer tokens, see docs/report.md).
    max_sentence_tokens: int = 200
    # Character windows around a location phrase (ours, set on the IU reports; docs/report.md):
    # "clear"/"normal"/"unremarkable" within clear_before_chars before it, or "is clear" /
    # "are normal" within clear_after_chars after it, make it a normal place, not a finding's;
    # "compared to" within comparison_before_chars before it makes it the term of a comparison.
    clear_before_chars: int = 20
    clear_after_chars: int = 30
    comparison_before_chars: int = 30
    # Word windows of the rules structurer (ours, set on the IU reports; cxrils.report.rules):
    # a place after a finding joined to it by link words ("opacity in the right base") is
    # its place within place_link_words words; a place at most place_before_words words
    # before the next finding is that finding's; a place after a finding with no break
    # word between, within place_after_words words; an unlocated finding shares the place
    # of the located finding before it within share_place_words words, not counting that
    # finding's own place after it ("right pleural effusion with adjacent atelectasis"); a
    # place infers the finding after it within place_inference_words words ("blunting of
    # the left costophrenic angle, consistent with a small effusion"); an observation and
    # the disease it is said to represent are at most inference_link_words words apart; a
    # density is said to be a non-lung finding ("density consistent with a hiatal hernia")
    # within named_other_words words.
    place_link_words: int = 10
    place_before_words: int = 3
    place_after_words: int = 12
    share_place_words: int = 8
    place_inference_words: int = 8
    inference_link_words: int = 12
    named_other_words: int = 10
    # A question mark hedges the finding that follows it within question_mark_words words,
    # with no punctuation between ("? right lower lobe pneumonia"; ours, cxrils.report.rules
    # ._question_marks; no IU report or pair CSV changes with it).
    question_mark_words: int = 4
    # A line of a section that ends with no punctuation and no joining word, shorter than
    # line_statement_max_chars characters, before a line opening with a capital letter,
    # is a statement of its own ("No pneumothorax\nLarge left pleural effusion": one finding
    # per line, without full stops). Ours: MIMIC-CXR wraps its lines near 70-80 characters
    # inside sentences, so a wrapped line is longer; 0 turns the rule off.
    line_statement_max_chars: int = 50
    # A report section of at least language_min_words words (0 = no check) holding at
    # least language_min_foreign function words of other European languages, and more
    # of them than English ones, is excluded as not English (cxrils.report.language; ours:
    # no IU report and no COVID-19 case note of the shared data is excluded). The
    # structurers read English; silence on another language would become negatives.
    language_min_words: int = 4
    language_min_foreign: int = 2


@dataclass
class IOConfig:
    """Image loading limits."""

    max_pixels: int = 100_000_000  # refuse larger images with ImageLoadError (decompression bombs)
    # DICOM VOI: auto (first VOI LUT, else first window, else min-max) | lut[:k] | window[:k]
    # (the k-th, 0 first) | minmax. Recorded in each image's transforms (docs/io.md).
    voi: str = "auto"


@dataclass
class SplitConfig:
    """Deterministic patient-level split when the input has no split file (ours)."""

    val_fraction: float = 0.1
    test_fraction: float = 0.1
    seed: int = 0
    # What a hash split keeps together: "patient" (every image needs a patient id), or
    # "study" for inputs where each study is a different patient (`--split-by study`).
    by: str = "patient"


#: The report sections of the Indiana University collection (``nlmcxr_reports_all.csv``
#: columns) that ``inputs.iu_sections`` may join.
IU_SECTIONS: tuple[str, ...] = ("indication", "comparison", "findings", "impression")


@dataclass
class InputConfig:
    """Limits on the input rows (ours: the paper gives none).

    A report over either cap is excluded with the reason, or with ``report_over_cap =
    "truncate"`` cut at the last sentence end within the cap (the cut is recorded in
    the records' provenance). The public pairs' longest report has 5,465 characters
    and 41 sentences; MIMIC-CXR reports are of the same order.
    """

    report_max_chars: int = 20_000  # 0 = no character cap
    report_max_sentences: int = 200  # 0 = no sentence cap; sentences end in . ! or ? before a space
    report_over_cap: str = "exclude"  # exclude | truncate
    # IU X-ray report sections joined into a study's report text, in this order, as
    # ``NAME: text`` paragraphs (the layout of pairs/iu_pairs.csv; ours): the indication and
    # comparison give context, the findings and impression the findings (paper section 3.1
    # structures the whole report).
    iu_sections: tuple[str, ...] = IU_SECTIONS


@dataclass
class RayStageConfig:
    """Ray resources of one model-backed pipeline step (``pipeline.ray.<step>``).

    Batch size and GPUs change how fast a step runs, never its records: every image's
    output is independent of the batch it travels in (docs/pipeline.md; the float32
    last digits of its grounding account may differ with the thread layout).
    """

    num_gpus: float = 0.0  # GPUs per actor (fractions share one GPU); 0 = none
    num_cpus: float = 0.0  # CPUs per actor; 0 = an even share of the cluster's CPUs
    batch_size: int = 1  # images per call of the step's batch method
    actors: int = 0  # actors in this step's pool; 0 = --workers


@dataclass
class RayConfig:
    """One actor pool per model-backed step of the Ray runner (docs/pipeline.md)."""

    anatomy_x: RayStageConfig = field(default_factory=RayStageConfig)  # anatomy of x (edit region)
    anomaly: RayStageConfig = field(default_factory=RayStageConfig)  # x_hat, x_ano (RadEdit's role)
    anatomy_x_hat: RayStageConfig = field(default_factory=RayStageConfig)  # location masks (CXAS's role)
    detector: RayStageConfig = field(default_factory=RayStageConfig)  # lesion boxes (YOLO's role)


@dataclass
class PipelineConfig:
    """How the runners execute the steps (results do not depend on it)."""

    ray: RayConfig = field(default_factory=RayConfig)


@dataclass
class AnomalyConfig:
    """Anomaly mappers (docs/grounding.md). Pixel sizes are at ``reference_size_px`` on
    the longest side and scale with the image."""

    # builtin backend (default): the learned lesion map (cxrils train-anomaly; ours).
    # x_ano = builtin_reference_tau * p / p_star inside the lungs, with p the network's
    # lesion probability and p_star its best-IoU threshold on the tuning images (stored
    # with the weights), so A = x_ano >= tau_ano is {p >= p_star} at Table 7's 0.10.
    builtin_weights: str = ""  # safetensors file; empty = cxrils/weights/anomaly_builtin.safetensors
    builtin_reference_tau: float = 0.10  # the tau_ano (Table 7) that p_star maps to
    # atlas backend: brightness above a healthy-lung atlas fitted on normal images (ours)
    reference_size_px: int = 512  # image side the pixel sizes below refer to
    smooth_sigma_px: float = 5.0  # Gaussian smoothing of x before the comparison (ours)
    dark_percentile: float = 1.0  # aerated-lung reference: this percentile of the lungs (ours)
    healthy_sd: float = 2.0  # healthy ceiling = atlas mean + healthy_sd * atlas sd (ours)
    atlas_path: str = ""  # healthy-lung atlas JSON; empty = cxrils/weights/anomaly_atlas.json
    min_contrast: float = 20.0  # grey levels; lower lung-to-mediastinum contrast is an error (ours)
    atlas_bridge_fraction: float = 0.3  # width of the closing that bridges the lungs, share of image width (ours)
    atlas_min_reference_px: int = 50  # fewest mediastinum pixels for the soft-tissue reference (ours)
    # radedit backend (paper section 3.1 step 2, Appendix A.3). The paper gives no steps,
    # guidance or skip; the hub pipeline's own defaults could not be read (docs/adapters.md,
    # "Where each default comes from"), so N, w and the skip ratio are the values that
    # published callers of microsoft/radedit's pipeline pass (num_inference_steps=100,
    # weights=[7.5], skip_ratio=0.3: two independent projects, both calling it as the model
    # card assembles it); 7.5 is also diffusers' StableDiffusionPipeline guidance default.
    radedit_size: int = 512  # RadEdit works at 512 x 512 (paper Appendix A.3)
    radedit_prompt: str = "No acute cardiopulmonary process"  # paper section 3.1
    radedit_steps: int = 100  # scheduler timesteps N of inversion and editing (published callers)
    radedit_guidance: float = 7.5  # classifier-free guidance scale w (published callers)
    # share of the schedule skipped before editing starts, skip = int(steps * ratio) as in
    # microsoft/radedit's pipeline (0.3: published callers)
    radedit_skip_ratio: float = 0.3
    # eta of the editing (reverse) process (1.0: the default of a published derivative of
    # microsoft/radedit's pipeline.py, which also passes etas=1.0 to the inversion).
    # The inversion always runs with eta 1 (its pipeline calls inversion_forward_process with
    # etas=1.0 whatever this is; radedit.INVERSION_ETA).
    radedit_eta: float = 1.0
    radedit_seed: int = 0
    # Local copies (nothing is downloaded): the UNet is backends.radedit_dir (microsoft/radedit)
    radedit_vae_dir: str = ""  # stabilityai/sdxl-vae
    radedit_text_encoder_dir: str = ""  # microsoft/BiomedVLP-BioViL-T (model + tokenizer)


@dataclass
class DetectionConfig:
    """Lesion detectors (paper section 3.1 step 2; Appendix A.3)."""

    # onnx backend (VinDr-CXR YOLO): letterbox size, score floor and NMS (ours). The
    # score floor stays below tau_conf_edema (0.01, Table 7) so c2 decides, not the detector.
    onnx_input_size: int = 640
    onnx_min_score: float = 0.005
    # NMS IoU: ours; yolov5's detect.py uses 0.45 and ultralytics 0.7, and the VinDr-CXR
    # checkpoint's own value is not published (docs/adapters.md)
    onnx_nms_iou: float = 0.5
    onnx_max_det: int = 300  # boxes kept per image after NMS (yolov5 and ultralytics max_det)
    # builtin backend: the learned CenterNet detector (cxrils train-detector; ours). Its
    # score floor stays below tau_conf_edema (0.01, Table 7) so c2 decides, as for onnx.
    builtin_weights: str = ""  # safetensors file; empty = cxrils/weights/detector_builtin.safetensors
    builtin_min_score: float = 0.005
    builtin_max_boxes: int = 10  # highest-scoring peaks kept per image
    builtin_nms_iou: float = 0.5  # boxes of one class overlapping a better one by more are dropped


@dataclass(frozen=True)
class LesionDataConfig:
    """Human lesion labels the built-in lesion models train on (``cxrils.training.lesion_data``;
    ours). Changing a value changes which images train the shipped detector and anomaly
    map, hence the generated dataset."""

    # Near-duplicate rule: coarse thumbnails (squashed to a square, as COVID-QU-Ex did
    # to its sources) must correlate >= dup_coarse_min, then high-pass thumbnails >=
    # dup_fine_min. Chosen by eye on the shared data (ours): copies of one image score
    # 0.8-1.0 on the fine test; images of one patient on other days and a few
    # look-alikes 0.7-0.8 (also excluded: it only costs training images); the best
    # match of a COVID-QU-Ex image among the JSRT images (which COVID-QU-Ex does not
    # contain) stays near 0.7.
    dup_coarse_side: int = 32
    dup_coarse_min: float = 0.85
    dup_fine_side: int = 64
    dup_fine_sigma: float = 3.0
    dup_fine_min: float = 0.70
    # Detector targets: components of an infection mask smaller than this share of the
    # lung area are specks, not boxes (ours).
    box_min_area_frac: float = 0.02


@dataclass(frozen=True)
class SyntheticConfig:
    """Synthetic findings drawn on training images (``cxrils.training.synthetic``; ours).

    They change the shipped weights, hence the generated dataset. Ranges are (low, high)
    of a uniform draw; heights, areas and thicknesses are fractions of the lung, widths
    and blurs fractions of the image's longer side. Chosen by eye on JSRT and COVID-QU-Ex
    canvases so that the drawn findings look like those of adult films; no threshold was
    tuned on them.
    """

    effusion_height: tuple[float, float] = (0.04, 0.35)  # fluid depth above the lung's lowest row
    effusion_meniscus: tuple[float, float] = (0.02, 0.15)  # rise of the surface at the chest wall
    blob_area: tuple[float, float] = (0.04, 0.35)  # consolidation-like blob, share of the lung
    band_thickness: tuple[float, float] = (0.03, 0.08)  # plate atelectasis, share of lung height
    density_strength: tuple[float, float] = (0.55, 0.95)  # blend towards soft-tissue brightness
    edge_sigma: float = 0.006  # Gaussian blur of a drawn region's edge (fluid: sharp surface)
    blob_edge_sigma: float = 0.02  # ill-defined margin of airspace opacity
    line_width: tuple[float, float] = (0.003, 0.008)  # tubes and wires
    heart_factor: tuple[float, float] = (1.05, 1.45)  # widening of an enlarged heart
    # Built-in lesion networks (cxrils.training.{anomaly,detector}_train): share of the
    # training images given synthetic lesions (normal / COVID-19 images), at most this many,
    # of these kinds (effusion, airspace opacity, plate atelectasis).
    lesion_p_normal: float = 0.5
    lesion_p_covid: float = 0.1
    lesions_max: int = 2
    lesion_kind_weights: tuple[float, float, float] = (0.4, 0.4, 0.2)
    # Probabilities per training image (anatomy network, cxrils.training.anatomy_train).
    p_effusion: float = 0.25
    p_blob: float = 0.2
    p_heart: float = 0.25
    p_lines: float = 0.3


@dataclass(frozen=True)
class LesionTrainConfig:
    """Training of a built-in lesion network on the COVID-QU-Ex tuning part (ours;
    ``cxrils train-detector``, ``cxrils train-anomaly``). Sizes fit a 2-core CPU."""

    input_size: int = 128  # network input side S (the image is squashed to S x S)
    widths: tuple[int, ...] = (12, 24, 48, 96, 128)  # encoder stage channels
    epochs: int = 12
    batch_size: int = 16
    lr: float = 3e-3  # AdamW peak of a one-cycle schedule (torch OneCycleLR defaults otherwise)
    weight_decay: float = 1e-4
    val_fraction: float = 0.15  # share of the role's images (by hash) that picks the best epoch
    aug_scale: float = 0.10  # random zoom +-10%
    aug_rotate_deg: float = 7.0  # random rotation +-7 degrees
    aug_shift: float = 0.06  # random shift +-6% of the side
    seed: int = 0


@dataclass(frozen=True)
class DetectorTrainConfig(LesionTrainConfig):
    """The CenterNet detector's training (Zhou et al. 2019, "Objects as Points")."""

    focal_alpha: float = 2.0  # penalty-reduced focal loss exponents (CenterNet eq. 1)
    focal_beta: float = 4.0
    size_weight: float = 1.0  # L1 on log box size (ours; CenterNet regresses raw sizes with 0.1)
    offset_weight: float = 1.0  # L1 on the centre offset (CenterNet)
    gaussian_alpha: float = 0.54  # centre heatmap sigma = alpha * side / 6 (TTFNet, Liu et al. 2020)


@dataclass(frozen=True)
class AnomalyTrainConfig(LesionTrainConfig):
    """The learned anomaly map's training: BCE + soft Dice on the infection mask (ours)."""

    # Issue 28: wider and trained longer than the detector, the epoch chosen by the validation
    # pixel AUROC (anomaly_train). Chosen on the tuning part's detector half, which the map never
    # trains on, never on the report part: against the former 12-128 channels x 18 epochs (same
    # epoch rule) and the previous release, a higher pixel AUROC and fewer Normal films flagged
    # on at least 15 % of their lungs (benchmarks/lesion_models.py, docs/results/lesion_models.md;
    # the detector half's rows are therefore in-sample, the report part's row is the held-out one).
    widths: tuple[int, ...] = (16, 32, 64, 128, 192)
    epochs: int = 30
    bce_weight: float = 1.0
    dice_weight: float = 1.0
    # candidate thresholds of the lesion probability for p_star (0.10, 0.15, ... 0.90; ours)
    p_star_grid: tuple[float, ...] = tuple(round(0.10 + 0.05 * k, 2) for k in range(17))
    # Give the network the lung mask as a second input channel (the expert lung masks in
    # training, the anatomy stage's lungs at inference). Off: measured no better on the
    # tuning part (benchmarks/lesion_models.py, docs/grounding.md) and it would tie the map
    # to the anatomy model (ours).
    lung_input: bool = False
    lung_jitter_px: int = 2  # with lung_input: the lung channel grown or shrunk by up to this many px (ours)


@dataclass(frozen=True)
class AnatomyDataConfig:
    """The anatomy model's training data (``cxrils train-anatomy``, :mod:`cxrils.training.
    anatomy_data`; ours): its held-back split and the near-duplicate rule that keeps copies
    of held-back images out of training. Changing a value changes the shipped anatomy
    weights (hence the generated dataset) and the held-back images the benchmarks report on."""

    # Percentage of patients held out for testing: a patient is in ``test`` when
    # sha256("<source>:<patient_id>") read as an integer, modulo 100, is below it.
    test_percent: int = 20
    # Side of the square thumbnail compared by the near-duplicate rule, pixels.
    dup_size: int = 64
    # Pearson correlation of two thumbnails from which two images count as near-duplicates
    # (chosen by eye on pairs of the shared data: copies of one image, also re-cropped,
    # re-scaled or re-exposed, lie above 0.93; the best match of a COVID-QU-Ex image among
    # the JSRT images, which share no image with it, stays below 0.94). Conservative:
    # follow-up images of one patient and some look-alikes also pass, which only costs
    # training images.
    dup_min_correlation: float = 0.93


@dataclass(frozen=True)
class LightDataConfig:
    """The light model's training dataset built from human lesion masks
    (:mod:`cxrils.training.light_data`, :mod:`cxrils.training.human_grounding`; ours,
    issue 18). Changing a value changes the shipped light model."""

    # Share of the human-masked (and JSRT, and synthetic) images put in the validate split.
    validate_fraction: float = 0.15
    # Halves of the COVID-QU-Ex tuning part (cxrils.training.lesion_data.ROLES) whose images
    # and expert masks become records. Issue 28: both; the anomaly network trained on the
    # "anomaly" half, but its x_ano separates lesion from lung there only a little better
    # than on the unseen report part (pixel AUROC of docs/results/human_masks.md's x_ano
    # table), so the prior is not much better on those images than on new ones.
    covid_qu_ex_roles: tuple[str, ...] = ("detector", "anomaly")
    # Zone questions (basic at a zone of vocab.INSTRUCTION_LOCATIONS) drawn once per Normal
    # image (every type is asked the same zones) besides light_data.NORMAL_ABSENT_FORMS.
    normal_absent_zones: int = 2
    # Times each generated cardiomegaly train positive appears: the demo reports name
    # cardiomegaly in only a handful of images, against hundreds of negatives; with the CTR
    # input the presence decision can generalise from few, repeated, consistent examples.
    cardiomegaly_repeat: int = 20
    # Times each JSRT cardiomegaly train positive appears (fewer than the generated ones:
    # there are about ten times as many).
    jsrt_cardiomegaly_repeat: int = 5
    # A lung or zone holds a human-masked lesion when it holds at least this share of the
    # lesion's pixels (or of a box's width, for a side).
    side_min_share: float = 0.10


@dataclass
class MimicIlsConfig:
    """Importing the released MIMIC-CXR-Ext-ILS 1.0.0 (``cxrils import-mimic-ils``, its
    ``--max-side``). Not a section of :class:`Config`: no ``generate`` setting, so it
    neither shows in ``cxrils config show`` nor enters a generated dataset's provenance
    (third new-user trial: ``--set mimic_ils.max_side=512`` changed nothing and refused a
    resume)."""

    # Longest image side stored (0 = keep the original MIMIC-CXR-JPG size). 1024 is the
    # ResizeLongestSide(1024) with which KAIST-Edlab/ROSALIA's ReasonSegDataset feeds SAM and
    # on whose grid its validate() scores masks (utils/reason_seg_dataset.py).
    max_side: int = 1024
    # A mask pixel is foreground when every colour channel equals this value: the
    # ``(mask == 255)`` of ReasonSegDataset.__getitem__ (masks are 0/255 PNGs).
    mask_foreground: int = 255


#: Config sections that change how a run executes (Ray actors, GPUs per step, batch
#: sizes), never what it writes: results do not depend on batch size or placement
#: (tests/pipeline/test_pipeline_batches.py), so they stay out of the provenance and a
#: resume may change them.
EXECUTION_SECTIONS: tuple[str, ...] = ("pipeline",)


@dataclass
class Config:
    """The whole configuration of a cxrils run."""

    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    qc: QCConfig = field(default_factory=QCConfig)
    anatomy: AnatomyConfig = field(default_factory=AnatomyConfig)
    instructions: InstructionConfig = field(default_factory=InstructionConfig)
    backends: BackendConfig = field(default_factory=BackendConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    io: IOConfig = field(default_factory=IOConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    inputs: InputConfig = field(default_factory=InputConfig)
    anomaly: AnomalyConfig = field(default_factory=AnomalyConfig)
    detection: DetectionConfig = field(default_factory=DetectionConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON/TOML serialisable)."""
        return dataclasses.asdict(self)

    def dataset_settings(self) -> dict[str, Any]:
        """:meth:`to_dict` without the sections that only say how a run executes
        (:data:`EXECUTION_SECTIONS`): what a generated dataset depends on, recorded in
        its provenance and compared when a run resumes."""
        return {k: v for k, v in self.to_dict().items() if k not in EXECUTION_SECTIONS}

    def to_json(self) -> str:
        """Stable JSON text (sorted keys) of :meth:`dataset_settings`, used for provenance."""
        return json.dumps(self.dataset_settings(), sort_keys=True)


def _coerce(section: str, key: str, value: Any, current: Any) -> Any:
    expected = type(current)
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):  # TOML/--set 1 and 0, as "1" and "0"
            return bool(value)
        if isinstance(value, str) and value.lower() in {"true", "false", "1", "0", "yes", "no"}:
            return value.lower() in {"true", "1", "yes"}
    elif expected is int and not isinstance(value, bool):
        try:
            if isinstance(value, (int, str)):
                return int(value)
        except ValueError:
            pass
    elif expected is float and not isinstance(value, bool):
        try:
            if isinstance(value, (int, float, str)):
                return float(value)
        except ValueError:
            pass
    elif expected is str and isinstance(value, (str, int, float)):
        return str(value)
    elif expected is tuple and all(isinstance(v, str) for v in current):
        # a tuple of names: a TOML array of strings, or "a,b,c" from --set
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, (list, tuple)) and all(isinstance(v, str) for v in items):
            return tuple(v.strip() for v in items)
    raise ConfigError(f"{section}.{key}: expected {expected.__name__}, got {value!r}")


def _is_ratio(key: str) -> bool:
    """Ratio-valued keys (thresholds and fractions), which must lie in [0, 1]."""
    return key.startswith(("tau_", "ctr_")) or key.endswith(("_fraction", "_prob", "_tol", "_iou"))


def _check_value(section: str, key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value):
        raise ConfigError(f"{section}.{key}: must be a finite number, got {value!r}")
    if value < 0:
        raise ConfigError(f"{section}.{key}: must be >= 0, got {value!r}")
    if _is_ratio(key) and value > 1:
        raise ConfigError(f"{section}.{key}: is a ratio and must lie in [0, 1], got {value!r}")


#: Values ``grounding.c1_bilateral`` accepts (see GroundingConfig): the paper's c1 first.
C1_BILATERAL: tuple[str, ...] = ("union", "per_lung")

#: Values ``backends.precision`` accepts (see BackendConfig).
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")


def _check_config(cfg: Config) -> Config:
    """Checks that involve more than one value."""
    if cfg.report.differential_certainty not in DIFFERENTIAL_CERTAINTIES:
        raise ConfigError(
            f"report.differential_certainty: must be one of {DIFFERENTIAL_CERTAINTIES}, "
            f"got {cfg.report.differential_certainty!r}"
        )
    if cfg.report.max_sentence_tokens < 1:
        raise ConfigError(f"report.max_sentence_tokens: must be >= 1, got {cfg.report.max_sentence_tokens}")
    if cfg.io.max_pixels < 1:
        raise ConfigError(f"io.max_pixels: must be >= 1, got {cfg.io.max_pixels}")
    if not VOI_CHOICE.fullmatch(cfg.io.voi):
        raise ConfigError(f"io.voi: must be auto, minmax, lut, lut:K, window or window:K, got {cfg.io.voi!r}")
    qc = cfg.qc
    if not (
        qc.plausible_lung_area_min_fraction <= qc.plausible_lung_area_max_fraction
        and qc.ctr_plausible_min <= qc.ctr_max_cardiomegaly_negative <= qc.ctr_plausible_max
    ):
        raise ConfigError(
            "qc: need plausible_lung_area_min_fraction <= plausible_lung_area_max_fraction and "
            "ctr_plausible_min <= ctr_max_cardiomegaly_negative <= ctr_plausible_max"
        )
    if cfg.split.by not in SPLIT_BY:
        raise ConfigError(f"split.by: must be {' or '.join(SPLIT_BY)}, got {cfg.split.by!r}")
    if not 0 < cfg.anatomy.cxas_threshold < 1:
        raise ConfigError(f"anatomy.cxas_threshold: must lie in (0, 1), got {cfg.anatomy.cxas_threshold}")
    sections = cfg.inputs.iu_sections
    if not sections or not all(sections) or len(set(sections)) != len(sections):
        raise ConfigError(f"inputs.iu_sections: must name one or more distinct sections, got {list(sections)}")
    unknown = [s for s in sections if s not in IU_SECTIONS]
    if unknown:  # a typo would make every IU report empty (third new-user trial)
        raise ConfigError(f"inputs.iu_sections: {unknown} not among the IU sections {list(IU_SECTIONS)}")
    a = cfg.anatomy
    if not 0 < a.zone_apical_end < a.zone_upper_end < a.zone_mid_end < 1:
        raise ConfigError(
            "anatomy: need 0 < zone_apical_end < zone_upper_end < zone_mid_end < 1, got "
            f"{a.zone_apical_end}, {a.zone_upper_end}, {a.zone_mid_end}"
        )
    if cfg.inputs.report_over_cap not in ("exclude", "truncate"):
        raise ConfigError(f"inputs.report_over_cap: must be exclude or truncate, got {cfg.inputs.report_over_cap!r}")
    if cfg.grounding.c1_bilateral not in C1_BILATERAL:
        raise ConfigError(
            f"grounding.c1_bilateral: must be one of {list(C1_BILATERAL)}, got {cfg.grounding.c1_bilateral!r}"
        )
    if cfg.grounding.connectivity not in (4, 8):
        raise ConfigError(f"grounding.connectivity: must be 4 or 8, got {cfg.grounding.connectivity}")
    for key, value in (
        ("grounding.reference_size_px", cfg.grounding.reference_size_px),
        ("anatomy.clahe_tile_grid", cfg.anatomy.clahe_tile_grid),
        ("detection.onnx_max_det", cfg.detection.onnx_max_det),
    ):
        if value < 1:
            raise ConfigError(f"{key}: must be >= 1, got {value}")
    if cfg.split.val_fraction + cfg.split.test_fraction >= 1:
        raise ConfigError(
            f"split.val_fraction + split.test_fraction must be < 1, got "
            f"{cfg.split.val_fraction} + {cfg.split.test_fraction}"
        )
    return _check_runtime(cfg)


def _check_runtime(cfg: Config) -> Config:
    """Checks of the image adapters' and runners' keys: allowed sets and ranges."""
    if cfg.backends.precision not in PRECISIONS:
        raise ConfigError(f"backends.precision: must be one of {list(PRECISIONS)}, got {cfg.backends.precision!r}")
    if not 0 < cfg.anomaly.radedit_eta <= 1:
        raise ConfigError(f"anomaly.radedit_eta: must lie in (0, 1], got {cfg.anomaly.radedit_eta}")
    for step in dataclasses.fields(cfg.pipeline.ray):
        if getattr(cfg.pipeline.ray, step.name).batch_size < 1:
            raise ConfigError(
                f"pipeline.ray.{step.name}.batch_size: must be >= 1, "
                f"got {getattr(cfg.pipeline.ray, step.name).batch_size}"
            )
    return cfg


def _section(cfg: Config, names: list[str]) -> Any:
    """The (nested) config section ``names`` of ``cfg``; a ConfigError names an unknown one."""
    obj: Any = cfg
    where: list[str] = []
    for name in names:
        child = getattr(obj, name, None) if name in {f.name for f in dataclasses.fields(obj)} else None
        if not dataclasses.is_dataclass(child):
            if not where and name == "mimic_ils":  # a section of configs saved before it was dropped
                raise ConfigError(
                    "mimic_ils is no config section any more (it changed no command's output): "
                    "remove it; the MIMIC-ILS import takes `cxrils import-mimic-ils --max-side`"
                )
            known = [f.name for f in dataclasses.fields(obj) if dataclasses.is_dataclass(getattr(obj, f.name))]
            raise ConfigError(f"unknown config section {'.'.join(where + [name])!r}; known: {known}")
        obj, where = child, where + [name]
    return obj


def _set(cfg: Config, path: list[str], value: Any) -> None:
    """Set the leaf ``path`` (section names, then the key) of ``cfg`` to ``value``."""
    obj = _section(cfg, path[:-1])
    section, key = ".".join(path[:-1]), path[-1]
    names = {f.name for f in dataclasses.fields(obj)}
    if key not in names:
        raise ConfigError(f"unknown config key {section}.{key}; known: {sorted(names)}")
    if dataclasses.is_dataclass(getattr(obj, key)):
        raise ConfigError(f"config section {section}.{key} must be a table, got {value!r}")
    coerced = _coerce(section, key, value, getattr(obj, key))
    _check_value(section, key, coerced)
    setattr(obj, key, coerced)


def _set_table(cfg: Config, where: list[str], values: Any) -> None:
    """Apply a (possibly nested) TOML table found at section path ``where``."""
    if not isinstance(values, dict):
        raise ConfigError(f"config section {'.'.join(where)!r} must be a table, got {values!r}")
    if not values:  # an empty table sets nothing, but must name a section ([mimic_ils] of old configs)
        _section(cfg, where)
    for key, value in values.items():
        if isinstance(value, dict):
            _set_table(cfg, where + [key], value)
        else:
            _set(cfg, where + [key], value)


def config_from_dict(data: dict[str, Any]) -> Config:
    """Build a :class:`Config` from a nested dict (sections may nest, e.g.
    ``{"pipeline": {"ray": {"anomaly": {"num_gpus": 1}}}}``).

    Raises
    ------
    ConfigError
        On an unknown section or key, a value of the wrong type, a non-finite or negative
        number, a ratio (``tau_*``, ``ctr_*``, ``*_fraction``, ``*_prob``, ``*_tol``, ``*_iou``)
        outside [0, 1], or inconsistent values.
    """
    cfg = Config()
    for section, values in data.items():
        if not isinstance(values, dict):
            raise ConfigError(f"config section {section!r} must be a table, got {values!r}")
        _set_table(cfg, [section], values)
    return _check_config(cfg)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a TOML configuration and apply ``section.key=value`` overrides.

    Parameters
    ----------
    path : path or None
        TOML file; None gives the defaults.
    overrides : list of str, optional
        Items like ``"grounding.tau_ano=0.05"`` or ``"pipeline.ray.anomaly.num_gpus=1"``
        applied after the file.

    Raises
    ------
    ConfigError
        If the file cannot be read or parsed, or a key or value is invalid (an error
        of the file's content begins with the file's path; one of an override does not).
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{p}: cannot read config: {err}") from err
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{p}: invalid TOML: {err}") from err
    try:
        cfg = config_from_dict(data)
    except ConfigError as err:
        if path is None:
            raise
        raise ConfigError(f"{path}: {err}") from err
    apply_overrides(cfg, overrides or [])
    return cfg


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """Apply ``section.key=value`` strings in place and return ``cfg``; nested
    sections are dotted too (``pipeline.ray.anomaly.batch_size=8``).

    Raises
    ------
    ConfigError
        On a malformed item, an unknown key or a bad value (as :func:`config_from_dict`).
    """
    for item in overrides:
        lhs, sep, value = item.partition("=")
        path = [part.strip() for part in lhs.split(".")]
        if not sep or len(path) < 2 or not all(path):
            raise ConfigError(f"override {item!r} is not of the form section.key=value")
        _set(cfg, path, value.strip())
    return _check_config(cfg)


def dump_toml(cfg: Config) -> str:
    """The configuration as TOML text."""
    import tomli_w

    return tomli_w.dumps(cfg.to_dict())
