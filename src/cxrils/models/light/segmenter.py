"""The user-facing light model: load, predict, save.

>>> seg = Segmenter.from_pretrained("runs/light")                    # doctest: +SKIP
>>> pred = seg.predict(x, "Segment the effusion in the left lung base.")  # doctest: +SKIP
>>> pred.mask.shape == x.shape, pred.answer, pred.presence_score      # doctest: +SKIP
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from cxrils import vocab
from cxrils.config import QCConfig
from cxrils.fsutil import atomic_path, atomic_write_json
from cxrils.models.base import CONFIG_NAME, ModelLoadError, Prediction, Segmenter, check_image, check_instruction
from cxrils.models.light.answer import answer_locations, compose_answer, locations_from_mask
from cxrils.models.light.config import LightConfig
from cxrils.models.light.consistency import Evidence, Hierarchy, decide, hierarchy_of, named_places, present_lungs
from cxrils.models.light.priors import (
    NO_LUNGS,
    PRIOR_STAGES,
    AnatomyFn,
    AnomalyFn,
    DetectorFn,
    ImagePriors,
    PriorComputer,
    ctr_feature,
    default_anatomy,
    default_anomaly,
    default_detector,
    prior_channels,
    stage_version,
)
from cxrils.models.light.text import InstructionEncoder, interpret_instruction
from cxrils.templates import ParsedText
from cxrils.vision.anatomy.measures import implausible_ctr

WEIGHTS_NAME = "model.safetensors"
#: Key of the weights file's metadata holding :attr:`LightSegmenter.prior_stages` (JSON).
PRIOR_STAGES_KEY = "prior_stages"


class LightSegmenter(Segmenter):
    """Light ILS model (FiLM U-Net, presence head, template answers); see docs/models.md.

    Parameters
    ----------
    config : LightConfig
    net : LightILSNet or LightEnsemble, optional
        A network (randomly initialised from ``config`` when None; an ensemble when
        ``config.ensemble > 1``).
    anatomy : callable, optional
        ``anatomy(x uint8 (h, w)) -> AnatomyMasks`` at (h, w), called on the reduced
        image of :mod:`cxrils.models.light.priors`: gives the ``region`` and ``lungs``
        priors (with ``config.priors``) and names the locations of a global positive
        answer; default: :func:`~cxrils.models.light.priors.default_anatomy`, created on first use.
    anomaly : callable, optional
        An :data:`~cxrils.models.light.priors.AnomalyFn` for the ``x_ano`` prior;
        default: the configured anomaly mapper (builtin), created on first use.
    detector : callable, optional
        A :data:`~cxrils.models.light.priors.DetectorFn` for the ``boxes`` prior (with
        ``config.box_prior``); default: the configured lesion detector (builtin).
    num_threads : int, optional
        torch intra-op threads for inference (unchanged when None).
    """

    model_type = "light"

    def __init__(
        self,
        config: LightConfig,
        net=None,
        *,
        anatomy: AnatomyFn | None = None,
        anomaly: AnomalyFn | None = None,
        detector: DetectorFn | None = None,
        num_threads: int | None = None,
    ) -> None:
        import torch

        from cxrils.models.light.network import build_light_network

        self.config = config
        self.encoder = InstructionEncoder(config.text_encoder)
        #: Length of the network's instruction vector: the encoder's, plus the CTR input.
        self.text_dim = self.encoder.dim + (1 if config.ctr_input else 0)
        self.net = net if net is not None else build_light_network(config, self.text_dim)
        self.net.eval()
        self._anatomy = anatomy
        self._anomaly = anomaly
        self._detector = detector
        self._prior_computer: PriorComputer | None = None
        #: Stage -> ``"{backend} {weights version}"`` (:func:`~cxrils.models.light.priors.stage_version`)
        #: of the prior stages the network's weights were trained with: set by
        #: :func:`cxrils.training.light_train.train_light`, written into the weights file's
        #: metadata by :meth:`save`, read back and checked by :meth:`from_pretrained`.
        #: Empty: not recorded (runs saved before it existed, or stages without a version).
        self.prior_stages: dict[str, str] = {}
        #: Warn once per image whose anatomy is no frontal chest radiograph (answers);
        #: training turns it off and logs a count (:class:`PriorComputer` ``warn``).
        self.warn_implausible = True
        if num_threads is not None:
            torch.set_num_threads(num_threads)

    @classmethod
    def _load(
        cls,
        path: Path,
        config: dict,
        *,
        anatomy: AnatomyFn | None = None,
        anomaly: AnomalyFn | None = None,
        detector: DetectorFn | None = None,
        num_threads: int | None = None,
    ) -> LightSegmenter:
        from safetensors.torch import load_file

        try:
            cfg = LightConfig.from_dict(config)
        except (TypeError, ValueError) as err:
            raise ModelLoadError(f"{path / CONFIG_NAME}: invalid light model config: {err}") from err
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise ModelLoadError(f"{weights}: missing; train the model first (cxrils train --model light)")
        seg = cls(cfg, anatomy=anatomy, anomaly=anomaly, detector=detector, num_threads=num_threads)
        try:
            state = load_file(str(weights))
            seg.net.load_state_dict(state)
            seg.prior_stages = _recorded_prior_stages(weights)
        except Exception as err:  # safetensors / torch raise several types on bad files
            raise ModelLoadError(f"{weights}: cannot load weights into the light model: {err}") from err
        seg.net.eval()
        given = {"anatomy": anatomy, "anomaly": anomaly, "detector": detector}
        seg._check_prior_stages(weights, {k for k, fn in given.items() if fn is not None})
        return seg

    def _check_prior_stages(self, weights: Path, given: set[str]) -> None:
        """Refuse default prior stages other than those the weights were trained with
        (:attr:`prior_stages`); stages the caller passed in (``given``) are the caller's
        choice and are not checked.

        Raises
        ------
        ModelLoadError
            Naming the stage, both versions and the way out.
        """
        recorded = {k: v for k, v in self.prior_stages.items() if k not in given}
        if not recorded:
            return
        try:
            current = self.stage_versions()
        except RuntimeError as err:
            raise ModelLoadError(f"{weights}: the light model's prior stages cannot be built: {err}") from err
        for stage, version in sorted(recorded.items()):
            now = current.get(stage)
            if now is not None and now != version:
                raise ModelLoadError(
                    f"{weights}: this light model was trained with the {stage} stage {version}, but the "
                    f"installed one is {now}: its priors would differ from those it learned from, and its "
                    "measured accuracy would not hold. Retrain it (cxrils train --model light), use the "
                    "cxrils release it was trained with, or, knowing this, pass the stage yourself in Python "
                    f"(Segmenter.from_pretrained(run, {stage}=...), which is not checked)"
                )

    def members(self) -> list[LightSegmenter]:
        """The networks of an ensemble (``config.ensemble > 1``), each as a single-network
        segmenter: a copy of ``config`` with ``ensemble=1`` and the same prior stages,
        sharing the member's weights (not copied; thresholds as stored). ``[self]`` for
        a single network. For scoring members alone (``benchmarks/light_members.py``)."""
        if self.config.ensemble == 1:
            return [self]
        single = copy.deepcopy(self.config)
        single.ensemble = 1
        stages = dict(anatomy=self._anatomy, anomaly=self._anomaly, detector=self._detector)
        out = [LightSegmenter(copy.deepcopy(single), net=m, **stages) for m in self.net.members]
        for member in out:
            member.prior_stages = dict(self.prior_stages)
        return out

    def save(self, path: str | Path) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``path`` (atomically), the
        weights' metadata holding :attr:`prior_stages` when recorded."""
        from safetensors.torch import save_file

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.net.state_dict().items()}
        meta = {"model_type": self.model_type}
        if self.prior_stages:
            meta[PRIOR_STAGES_KEY] = json.dumps(self.prior_stages, sort_keys=True)
        with atomic_path(out / WEIGHTS_NAME, suffix=".safetensors") as tmp:
            save_file(state, str(tmp), metadata=meta)
        atomic_write_json(out / CONFIG_NAME, self.config.to_dict())
        return out

    def image_priors(self, x: np.ndarray, key: str | None = None) -> ImagePriors:
        """Anatomy (and, with ``config.priors``, anomaly) priors of ``x`` uint8 (H, W)
        at the reduced working size, cached per image (``key`` or a pixel hash).

        Raises
        ------
        RuntimeError
            If the default anatomy or anomaly stage cannot be built.
        """
        if self._prior_computer is None:
            self._prior_computer = PriorComputer(*self._stages(), warn=self.warn_implausible)
        return self._prior_computer.priors(x, with_anomaly=self.config.priors, key=key)

    def _stages(self) -> tuple[AnatomyFn, AnomalyFn | None, DetectorFn | None]:
        """The anatomy, anomaly and detector callables the priors use (None where the
        config uses none), the defaults built here on first use and kept.

        Raises
        ------
        RuntimeError
            If a default stage cannot be built.
        """
        if self._anatomy is None:
            self._anatomy = default_anatomy()
        if self._anomaly is None and self.config.priors:
            self._anomaly = default_anomaly()
        if self._detector is None and self.config.priors and self.config.box_prior:
            self._detector = default_detector()
        anomaly = self._anomaly if self.config.priors else None
        detector = self._detector if self.config.priors and self.config.box_prior else None
        return self._anatomy, anomaly, detector

    def stage_versions(self) -> dict[str, str]:
        """Stage -> version (:func:`~cxrils.models.light.priors.stage_version`) of the prior
        stages in use, building the defaults; stages without a version are left out.

        Raises
        ------
        RuntimeError
            If a default stage cannot be built.
        """
        versions = {name: stage_version(fn) for name, fn in zip(PRIOR_STAGES, self._stages())}
        return {name: v for name, v in versions.items() if v is not None}

    def clear_prior_cache(self) -> None:
        """Forget cached image priors (e.g. to time a query on a new image)."""
        if self._prior_computer is not None:
            self._prior_computer.clear_cache()

    def network_inputs(self, images, priors: list[ImagePriors] | None, instructions: list[str]):
        """Network inputs of a batch.

        Parameters
        ----------
        images : torch.Tensor, float32 (B, 1, S, S)
            Images in [0, 1] at the network side S.
        priors : list of ImagePriors, optional
            One per item; required with ``config.priors`` or ``config.ctr_input``,
            else ignored.
        instructions : list of str

        Returns
        -------
        (torch.Tensor (B, C, S, S), torch.Tensor (B, D))
            C = 1 + 3 prior channels with ``config.priors`` (1 + 4 with ``config.box_prior``), else 1; D = :attr:`text_dim`
            (the encoder's dimension, plus the CTR feature with ``config.ctr_input``).
        """
        import torch

        x = images
        if self.needs_priors and (priors is None or len(priors) != len(instructions)):
            raise ValueError("config.priors / config.ctr_input need one ImagePriors per instruction")
        if self.config.priors:
            s = self.config.image_size
            maps = []
            for p, text in zip(priors, instructions):
                interp = interpret_instruction(text)
                maps.append(
                    prior_channels(p, interp.parsed if interp is not None else None, s, boxes=self.config.box_prior)
                )
            x = torch.cat([images, torch.from_numpy(np.stack(maps))], dim=1)
        t = self.encoder.encode(instructions)
        if self.config.ctr_input:
            t = np.concatenate([t, np.array([[ctr_feature(p.ctr)] for p in priors], np.float32)], axis=1)
        return x, torch.from_numpy(t)

    @property
    def needs_priors(self) -> bool:
        """Whether the network inputs need :class:`ImagePriors` (priors or the CTR input)."""
        return bool(self.config.priors or self.config.ctr_input)

    @property
    def answers_cardiomegaly_by_ctr(self) -> bool:
        """Whether "Segment the cardiomegaly." is answered by the anatomy's CTR
        (``cardiomegaly_by_ctr``, which needs the priors that hold the CTR) rather than by
        the presence score."""
        return bool(self.config.cardiomegaly_by_ctr) and self.needs_priors

    def _forward(
        self, images: list[np.ndarray], priors: list[ImagePriors] | None, instructions: list[str]
    ) -> dict[str, np.ndarray]:
        import cv2
        import torch

        s = self.config.image_size
        batch = np.stack([cv2.resize(x, (s, s), interpolation=cv2.INTER_AREA) for x in images])
        x_t, t_t = self.network_inputs(
            torch.from_numpy(batch.astype(np.float32) / 255.0)[:, None], priors, instructions
        )
        with torch.inference_mode():
            out = self.net(x_t, t_t)
        return {
            "mask_logits": out["mask"][:, 0],
            "presence": torch.sigmoid(out["presence"]).numpy(),
            "lesion": torch.softmax(out["lesion"], dim=1).numpy(),
            "certainty": torch.sigmoid(out["certainty"]).numpy(),
        }

    def presence_threshold(self, parsed: ParsedText | None) -> float:
        """``tau_presence_by_target[target]`` of the instruction's target when calibrated
        for it, else ``tau_presence`` (``parsed``: the instruction's ParsedText or None)."""
        target = parsed.target if parsed is not None else None
        return self.config.tau_presence_by_target.get(target, self.config.tau_presence)

    def _ctr_rule(self, parsed, priors: ImagePriors | None) -> str | None:
        """Why a cardiomegaly answer the score calls present is absent (``cardiomegaly_min_ctr``:
        the anatomy's CTR is not above it, or there is no CTR), else None."""
        gate = self.config.cardiomegaly_min_ctr
        if not gate or parsed is None or parsed.target != "cardiomegaly" or priors is None:
            return None  # a model without anatomy inputs (no priors, no CTR input) has no CTR to apply
        ctr = priors.ctr
        if ctr is not None and ctr > gate:
            return None
        measured = "no CTR (heart or lungs not found)" if ctr is None else f"CTR {ctr:.2f}"
        return (
            f"answered absent: the anatomy gives {measured}, not above {gate:.2f}, the cardiomegaly "
            "cut-off (LightConfig.cardiomegaly_min_ctr)"
        )

    def read_instruction(self, instruction: str) -> str:
        """The Table 2 reading of ``instruction`` (:meth:`InstructionEncoder.read`)."""
        return self.encoder.read(instruction)

    def predict(self, image: np.ndarray, instruction: str) -> Prediction:
        """Answer one instruction about one image (see :meth:`Segmenter.predict`).

        Raises
        ------
        ValueError
            If ``image`` is not uint8 (H, W) or ``instruction`` is not a str.
        cxrils.models.light.text.InstructionError
            If the structured encoder cannot read the instruction.
        """
        return self.predict_many([image], [instruction])[0]

    def predict_many(self, images: list[np.ndarray], instructions: list[str]) -> list[Prediction]:
        """Answer several (image, instruction) pairs in one network pass.

        With :attr:`LightConfig.consistent_answers`, each basic, global or lesion-inference
        question about a lung lesion type adds the three lung-level questions of its target (global, right
        lung, left lung) to the same pass, and each lung is decided once
        (:mod:`cxrils.models.light.consistency`), so the network batch may hold up to four
        rows per pair. With
        :attr:`LightConfig.cardiomegaly_by_ctr`, "Segment the cardiomegaly." is answered
        by the anatomy (:meth:`_cardiomegaly`; a model without anatomy inputs, neither
        ``priors`` nor ``ctr_input``, answers by its score; with
        :attr:`LightConfig.cardiomegaly_needs_score` the score must also pass).

        Returns
        -------
        list of Prediction
            Masks at each image's own (H, W).

        Raises
        ------
        ValueError
            If the lists differ in length or an image is not uint8 (H, W).
        cxrils.models.light.text.InstructionError
            If the structured encoder cannot read an instruction.
        """
        if len(images) != len(instructions):
            raise ValueError(f"{len(images)} images but {len(instructions)} instructions")
        if not images:
            return []
        images = [check_image(x) for x in images]
        instructions = [check_instruction(t) for t in instructions]
        priors = [self.image_priors(x) for x in images] if self.needs_priors else None
        c = self.config
        parsed_all = []
        for text in instructions:
            interp = interpret_instruction(text)
            parsed_all.append(interp.parsed if interp is not None else None)
        # the questions of consistent_answers ride in the same network pass
        trees = [hierarchy_of(p) if c.consistent_answers else None for p in parsed_all]
        rows = [(i, q) for i, tree in enumerate(trees) if tree is not None for q in tree.questions]
        out = self._forward(
            images + [images[i] for i, _ in rows],
            None if priors is None else priors + [priors[i] for i, _ in rows],
            list(instructions) + [q for _, q in rows],
        )
        extra = {}  # (pair, question) -> network row
        for k, key in enumerate(rows):
            extra[key] = len(images) + k
        preds = []
        for i, x in enumerate(images):
            parsed, tree = parsed_all[i], trees[i]
            prior = priors[i] if priors is not None else None
            p = float(out["presence"][i])
            threshold = self.presence_threshold(parsed)
            if (
                self.answers_cardiomegaly_by_ctr
                and prior is not None
                and parsed is not None
                and parsed.target == "cardiomegaly"
                and parsed.instruction_type == "global"
            ):
                mask, note = self._cardiomegaly(x, prior, p, threshold)
            elif tree is not None:
                mask, note = self._consistent(out, i, extra, x, prior, parsed, tree, threshold)
            else:
                on = p >= threshold
                note = self._ctr_rule(parsed, prior) if on else None
                mask = self._mask(out, i, x.shape) if on and note is None else np.zeros(x.shape, dtype=bool)
                if on and note is None and not mask.any():
                    note = f"answered absent: no pixel of the mask reaches tau_mask {c.tau_mask:g}"
            mask, note = _plausibility(prior, mask, note)
            present = bool(mask.any())
            locations: list[str] = []
            if (
                present
                and (parsed is None or parsed.instruction_type == "global")
                and (parsed is None or parsed.target not in vocab.ORGAN_LOCATIONS)
            ):
                anatomy = (prior if prior is not None else self.image_priors(x)).anatomy
                locations = answer_locations(
                    locations_from_mask(mask, anatomy, c.tau_location), c.lung_answer_min_zones
                )
            lesion = vocab.INFERENCE_LESION_TYPES[int(np.argmax(out["lesion"][i]))]
            certainty = "definitive" if out["certainty"][i] >= 0.5 else "tentative"
            answer = compose_answer(parsed, present, locations=locations, lesion=lesion, certainty=certainty)
            preds.append(
                Prediction(mask=mask, answer=answer, presence_score=p, presence_threshold=threshold, note=note)
            )
        return preds

    def _consistent(
        self,
        out: dict[str, np.ndarray],
        i: int,
        extra: dict[tuple[int, str], int],
        x: np.ndarray,
        prior: ImagePriors | None,
        parsed: ParsedText,
        tree: Hierarchy,
        threshold: float,
    ) -> tuple[np.ndarray, str | None]:
        """Mask and note of pair ``i`` under the consistent-answers rule
        (``consistent_answers``; :func:`cxrils.models.light.consistency.decide`);
        ``extra`` maps (pair, lung-level question) to its network row. A zone, lobe or
        list question lifted by the global answer answers with that answer's mask inside
        its locations."""
        rows = {key: extra[i, q] for key, q in tree.lung_questions.items()}
        masks = {key: self._mask(out, r, x.shape) for key, r in rows.items()}
        evidence = {
            key: self._evidence(key, float(out["presence"][r]), masks[key], x, prior, threshold)
            for key, r in rows.items()
        }
        own_mask = self._mask(out, i, x.shape)
        own_score = float(out["presence"][i])
        own = (
            self._evidence(tree.level, own_score, own_mask, x, prior, threshold)
            if tree.level is not None
            else Evidence(own_score, bool(own_mask.any()), tree.sides)
        )
        named: frozenset[str] = frozenset()
        global_mask = np.zeros(x.shape, dtype=bool)
        if tree.level is None and not own.passes(threshold):
            # where the global question's mask lies (the zones its answer text is built from): read by the
            # rule only for a zone, lobe or list question its own score does not answer
            lungs = present_lungs(evidence, threshold)
            if lungs:
                global_mask = self._lifted(
                    masks["global"], evidence["global"], evidence, masks, lungs, x, prior, threshold
                )
            if global_mask.any():
                anatomy = (prior if prior is not None else self.image_priors(x)).anatomy
                named = named_places(locations_from_mask(global_mask, anatomy, self.config.tau_location))
        present, covered, note = decide(tree, own, evidence, threshold, named)
        if not present:
            if note is None and own_score >= threshold:
                note = f"answered absent: no pixel of the mask reaches tau_mask {self.config.tau_mask:g}"
            return np.zeros(x.shape, dtype=bool), note
        if tree.level in (None, *vocab.WHOLE_LUNGS) and own.passes(threshold):
            return own_mask, note
        if tree.level is None:  # lifted by the global mask, which lies in one of its places
            inside = global_mask & self._region(x, prior, tree.locations)
            if not inside.any():  # named by the mask's side alone (it meets no zone)
                return inside, "answered absent: the global answer's mask does not reach this place"
            return inside, note
        if not tree.inference:
            evidence[tree.level], masks[tree.level] = own, own_mask
        return self._lifted(own_mask, own, evidence, masks, covered, x, prior, threshold), note

    def _lifted(
        self,
        own_mask: np.ndarray,
        own: Evidence,
        evidence: dict[str, Evidence],
        masks: dict[str, np.ndarray],
        covered: tuple[str, ...],
        x: np.ndarray,
        prior: ImagePriors | None,
        threshold: float,
    ) -> np.ndarray:
        """The mask of a lung-level answer present in the lungs ``covered``: its own mask
        where it passes, else the passing lung-level masks that lift those lungs, kept
        inside them (:meth:`_keep_in_lungs`)."""
        lifting = [masks[key] for key, ev in evidence.items() if ev.passes(threshold) and set(ev.lungs) & set(covered)]
        base = own_mask if own.passes(threshold) else np.logical_or.reduce(lifting)
        return self._keep_in_lungs(base, x, prior, covered, lifting)

    def _evidence(
        self, key: str, score: float, mask: np.ndarray, x: np.ndarray, prior: ImagePriors | None, threshold: float
    ) -> Evidence:
        """What lung-level question ``key`` says (:class:`Evidence`): a lung question
        names its own lung; a passing global question the lungs of the locations its
        mask lies in (:func:`locations_from_mask`)."""
        if key in vocab.WHOLE_LUNGS:
            return Evidence(score, bool(mask.any()), (key,))
        if score < threshold or not mask.any():
            return Evidence(score, bool(mask.any()), ())
        anatomy = (prior if prior is not None else self.image_priors(x)).anatomy
        sides = {vocab.LABEL_SIDE[loc] for loc in locations_from_mask(mask, anatomy, self.config.tau_location)}
        return Evidence(score, True, tuple(lung for lung in vocab.WHOLE_LUNGS if vocab.LABEL_SIDE[lung] in sides))

    def _mask(self, out: dict[str, np.ndarray], row: int, shape: tuple[int, int]) -> np.ndarray:
        """Bool (H, W) mask of network row ``row`` at ``shape``: sigmoid of the logits,
        bilinearly resized, at ``tau_mask``."""
        import torch
        import torch.nn.functional as F

        logits = F.interpolate(out["mask_logits"][row][None, None], size=shape, mode="bilinear", align_corners=False)[
            0, 0
        ]
        return (torch.sigmoid(logits) >= self.config.tau_mask).numpy()

    def _region(self, x: np.ndarray, prior: ImagePriors | None, labels) -> np.ndarray:
        """Union of anatomy labels at ``x``'s (H, W) (nearest-neighbour from the priors' size)."""
        import cv2

        anatomy = (prior if prior is not None else self.image_priors(x)).anatomy
        small = anatomy.union(tuple(labels)).astype(np.uint8)
        return cv2.resize(small, (x.shape[1], x.shape[0]), interpolation=cv2.INTER_NEAREST).astype(bool)

    def _keep_in_lungs(
        self, mask: np.ndarray, x: np.ndarray, prior: ImagePriors | None, present_lungs, lung_masks: list[np.ndarray]
    ) -> np.ndarray:
        """``mask`` inside the present lungs' anatomy, or, where nothing of it is left
        there, the union of ``lung_masks``, the passing lung-level answers that lift
        those lungs (consistent_answers)."""
        inside = mask & self._region(x, prior, present_lungs)
        if inside.any():
            return inside
        return np.logical_or.reduce(lung_masks) if lung_masks else inside

    def _cardiomegaly(
        self, x: np.ndarray, prior: ImagePriors, score: float, threshold: float
    ) -> tuple[np.ndarray, str | None]:
        """Answer "Segment the cardiomegaly." from the anatomy (``cardiomegaly_by_ctr``):
        the heart mask when the CTR exceeds ``cardiomegaly_min_ctr`` (and, with
        ``cardiomegaly_needs_score``, the network's presence ``score`` reaches
        ``threshold``), else empty with a note saying which condition failed. A CTR
        outside ``QCConfig.ctr_plausible_min..ctr_plausible_max`` (the pipeline's QC
        bounds) measures a failed mask, not a heart: answered absent."""
        gate, ctr = self.config.cardiomegaly_min_ctr, prior.ctr
        bad_ctr = None if ctr is None else implausible_ctr(ctr, QCConfig())
        if bad_ctr is not None:
            return np.zeros(x.shape, bool), (
                f"answered absent: the anatomy gives a {bad_ctr}, a failed heart or lung mask rather than "
                "a heart size (cardiomegaly_by_ctr)"
            )
        if ctr is None or ctr <= gate:
            measured = "no CTR (heart or lungs not found)" if ctr is None else f"CTR {ctr:.2f}"
            return np.zeros(x.shape, bool), (
                f"answered absent: the anatomy gives {measured}, not above {gate:.2f} (cardiomegaly_by_ctr)"
            )
        if self.config.cardiomegaly_needs_score and score < threshold:
            return np.zeros(x.shape, bool), (
                f"answered absent: CTR {ctr:.2f} is above {gate:.2f} but the presence score {score:.3f} is below "
                f"{threshold:.3f} (cardiomegaly_needs_score)"
            )
        heart = self._region(x, prior, ("heart",))
        note = None if heart.any() else "answered absent: the anatomy's heart mask is empty (cardiomegaly_by_ctr)"
        return heart, note


def _recorded_prior_stages(weights: Path) -> dict[str, str]:
    """:attr:`LightSegmenter.prior_stages` as recorded in ``weights``' metadata ({} when none).

    Raises
    ------
    ValueError
        If the record is not a JSON object of strings.
    """
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as fh:
        raw = (fh.metadata() or {}).get(PRIOR_STAGES_KEY)
    if raw is None:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"metadata {PRIOR_STAGES_KEY!r} is not an object of stage -> version strings: {raw!r}")
    return value


def _plausibility(prior: ImagePriors | None, mask: np.ndarray, note: str | None) -> tuple[np.ndarray, str | None]:
    """The answer's mask and note after the anatomy's frontal-plausibility check
    (:attr:`ImagePriors.implausible`): where the anatomy found no lungs the answer is
    absent (a lung lesion, a zone or a CTR needs them), and where it does not look like
    a frontal chest radiograph the note says the answer is not reliable."""
    if prior is None or prior.implausible is None:
        return mask, note
    if prior.implausible == NO_LUNGS:
        return np.zeros(mask.shape, dtype=bool), (
            "answered absent: the anatomy stage found no lungs in this image (is it a frontal chest radiograph?)"
        )
    warning = (
        f"this image does not look like a frontal chest radiograph ({prior.implausible}): the answer is not reliable"
    )
    return mask, warning if note is None else f"{note}; {warning}"
