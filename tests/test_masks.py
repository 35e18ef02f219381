"""cxrils.masks: COCO compressed RLE and the separate start-length RLE."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pycocotools import mask as coco_mask

from cxrils.masks import (
    MaskError,
    decode_rle,
    decode_start_length_rle,
    encode_rle,
    rle_area,
    rle_bbox,
    rle_from_json,
    rle_to_json,
    rle_to_uncompressed_counts,
)


def test_one_pixel_mask_counts_by_hand() -> None:
    # 3 rows x 4 columns, foreground at row 1, column 2.
    m = np.zeros((3, 4), dtype=bool)
    m[1, 2] = True
    rle = encode_rle(m)
    assert rle["size"] == [3, 4] and isinstance(rle["counts"], str)
    # Column-major (Fortran) order: columns 0 and 1 (6 pixels) then row 0 of column 2
    # are background -> 7 zeros, 1 one, then the remaining 12 - 8 = 4 zeros.
    assert rle_to_uncompressed_counts(rle) == [7, 1, 4]
    # Row-major order would have given [6, 1, 5]: the test would catch a C-order encoder.
    assert rle_to_uncompressed_counts(rle) != [6, 1, 5]
    assert rle_area(rle) == 1
    np.testing.assert_array_equal(decode_rle(rle), m)
    # The same mask written by hand as uncompressed COCO RLE decodes identically.
    np.testing.assert_array_equal(decode_rle({"size": [3, 4], "counts": [7, 1, 4]}), m)


def test_transposed_order_mistake_is_caught() -> None:
    m = np.zeros((3, 4), dtype=bool)
    m[1, 2] = True
    m[0, 3] = True
    # A classic bug: handing pycocotools a C-ordered buffer as if it were Fortran, which
    # is the same as encoding the transpose. Its counts differ from ours, and decoding
    # them with the real size gives a different mask: the check below catches it.
    wrong = coco_mask.encode(np.asfortranarray(m.T.astype(np.uint8)))["counts"].decode("ascii")
    assert wrong != encode_rle(m)["counts"]
    assert not np.array_equal(decode_rle({"size": [3, 4], "counts": wrong}), m)
    # Our encoder on non-square, non-symmetric masks round-trips exactly.
    rng = np.random.default_rng(0)
    for shape in [(7, 11), (11, 7), (1, 9), (9, 1)]:
        a = rng.random(shape) < 0.3
        np.testing.assert_array_equal(decode_rle(encode_rle(a)), a)
        np.testing.assert_array_equal(decode_rle(encode_rle(np.asfortranarray(a))), a)
        np.testing.assert_array_equal(decode_rle(encode_rle(a[:, ::-1])), a[:, ::-1])  # non-contiguous view


def test_empty_512_mask() -> None:
    rle = encode_rle(np.zeros((512, 512), dtype=bool))
    assert rle["size"] == [512, 512]
    assert rle_area(rle) == 0
    assert rle_to_uncompressed_counts(rle) == [512 * 512]
    assert rle_bbox(rle) == (0.0, 0.0, 0.0, 0.0)
    out = decode_rle(rle)
    assert out.shape == (512, 512) and out.dtype == bool and not out.any()
    assert rle_from_json(rle_to_json(rle)) == rle


def test_full_mask_and_zero_size() -> None:
    full = encode_rle(np.ones((4, 6), dtype=np.uint8))
    assert rle_to_uncompressed_counts(full) == [0, 24] and rle_area(full) == 24
    empty = encode_rle(np.zeros((0, 5), dtype=bool))
    assert decode_rle(empty).shape == (0, 5)


def test_json_round_trip_random_masks() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        h, w = rng.integers(1, 80, size=2)
        m = rng.random((h, w)) < rng.random()
        text = rle_to_json(encode_rle(m))
        obj = json.loads(text)
        assert set(obj) == {"size", "counts"} and isinstance(obj["counts"], str)
        back = rle_from_json(text)
        np.testing.assert_array_equal(decode_rle(back), m)
        assert rle_area(back) == int(m.sum())


def test_encode_accepts_numeric_and_rejects_bad_input() -> None:
    for fg in (1, 3, 255):
        m = np.array([[0, fg], [0, fg]], dtype=np.uint8)
        np.testing.assert_array_equal(decode_rle(encode_rle(m)), m != 0)
    # a new user's trial (stop 58): a random 0..255 array scored as all foreground
    for bad, values in ((np.array([[0, 3], [0, -1]]), "-1 to 3"), (np.array([[0, 128], [255, 7]]), "7 to 255")):
        with pytest.raises(MaskError, match=rf"foreground values {values}, not one positive value"):
            encode_rle(bad)
    with pytest.raises(MaskError, match="foreground values -1 to -1"):
        encode_rle(np.full((2, 2), -1))
    with pytest.raises(MaskError, match=r"mask is None: give a bool \(H, W\) array"):
        encode_rle(None)  # type: ignore[arg-type]
    with pytest.raises(MaskError, match="2-D"):
        encode_rle(np.zeros((2, 2, 2)))
    with pytest.raises(MaskError, match="dtype"):
        encode_rle(np.array([["a"]]))


def test_bbox_matches_numpy() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        h, w = rng.integers(2, 60, size=2)
        m = np.zeros((h, w), dtype=bool)
        r0, c0 = rng.integers(0, h), rng.integers(0, w)
        m[r0 : r0 + rng.integers(1, h), c0 : c0 + rng.integers(1, w)] = True
        m &= rng.random((h, w)) < 0.8
        if not m.any():
            continue
        rows, cols = np.nonzero(m)
        # (x0, y0, x1, y1): x = column, exclusive upper edge.
        assert rle_bbox(encode_rle(m)) == (cols.min(), rows.min(), cols.max() + 1.0, rows.max() + 1.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"size": [3, 4]},
        {"counts": "91:"},
        {"size": [3, 4], "counts": 5},
        {"size": [-1, 4], "counts": ""},
        {"size": [3, 4], "counts": ""},  # covers 0 pixels, not 12
        {"size": [3, 4], "counts": "5"},  # covers 5 pixels
        {"size": [3, 4], "counts": "zz"},  # character outside the COCO alphabet
        {"size": [3, 4], "counts": "9?"},  # ends in the middle of a value
        {"size": [3, 4], "counts": [7, 1, 5]},  # uncompressed, sums to 13
        {"size": [3, 4], "counts": [8, -1, 5]},  # negative run
        {"size": [3.5, 4], "counts": [7, 1, 4]},  # a fractional size, which int() would truncate
        {"size": ["3", "4"], "counts": [7, 1, 4]},  # text sizes
        {"size": [True, 4], "counts": [3, 1]},  # a boolean is not a height
        {"size": [3, 4, 1], "counts": [7, 1, 4]},  # three numbers
        "not a dict",
    ],
)
def test_malformed_rle_rejected(bad) -> None:
    with pytest.raises(MaskError):
        decode_rle(bad)
    with pytest.raises(MaskError):
        rle_area(bad)


def test_rle_from_json_errors() -> None:
    with pytest.raises(MaskError, match="JSON"):
        rle_from_json("{not json")
    with pytest.raises(MaskError):
        rle_from_json('{"size": [2, 2], "counts": "1"}')


def test_start_length_rle_row_major_one_indexed() -> None:
    # 2 rows x 3 cols; "2 2" = pixels 2 and 3 in 1-indexed row-major order: (0,1), (0,2).
    out = decode_start_length_rle("2 2", 2, 3)
    expected = np.array([[0, 1, 1], [0, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(out, expected)
    # Read column-major, the same runs would mark (1,0) and (0,1): a different mask.
    column_major = np.zeros(6, dtype=bool)
    column_major[1:3] = True
    assert not np.array_equal(out, column_major.reshape((2, 3), order="F"))
    # Several runs, and the last pixel.
    np.testing.assert_array_equal(
        decode_start_length_rle("1 1 6 1", 2, 3), np.array([[1, 0, 0], [0, 0, 1]], dtype=bool)
    )
    # Not the COCO flavour: the start-length text of a mask is not its COCO counts.
    assert encode_rle(out)["counts"] != "2 2"


def test_start_length_rle_empty_and_errors() -> None:
    for text in ("", "  ", "-1"):
        out = decode_start_length_rle(text, 4, 5)
        assert out.shape == (4, 5) and not out.any()
    for text, match in [
        ("1", "even"),
        ("0 2", "1-indexed"),
        ("2 -1", "non-negative"),
        ("5 3", "past the end"),
        ("a b", "non-integer"),
        ("1.5 2", "non-integer"),
    ]:
        with pytest.raises(MaskError, match=match):
            decode_start_length_rle(text, 2, 3)
    with pytest.raises(MaskError, match="size"):
        decode_start_length_rle("1 1", -2, 3)


@pytest.mark.parametrize("bad_run", [float("nan"), float("inf"), "3", True, 2.5, None])
def test_uncompressed_counts_must_be_integers(bad_run) -> None:
    # [7, 1, 4] is the one-pixel mask of test_one_pixel_mask_counts_by_hand; one run replaced.
    rle = {"size": [3, 4], "counts": [7, bad_run, 4]}
    with pytest.raises(MaskError, match="run 1"):
        decode_rle(rle)
    with pytest.raises(MaskError, match="run 1"):
        rle_area(rle)


def test_uncompressed_counts_integral_floats_accepted() -> None:
    # JSON writers may emit 7.0 for 7; the runs are the same integers.
    m = np.zeros((3, 4), dtype=bool)
    m[1, 2] = True
    np.testing.assert_array_equal(decode_rle({"size": [3, 4], "counts": [7.0, 1.0, 4.0]}), m)
    np.testing.assert_array_equal(decode_rle({"size": [3.0, np.int64(4)], "counts": [7, 1, 4]}), m)


def test_one_implementation_of_the_rle_helpers() -> None:
    # The evaluation uses the mask module's validator, decoder and converter (no copies).
    import cxrils.evaluation.counts as counts
    import cxrils.masks as masks

    assert counts.rle_areas is masks.rle_areas and counts.coco_rle is masks.coco_rle
    assert counts.as_bool_mask is masks.as_bool_mask and counts.InvalidRLE is masks.InvalidRLE
    with pytest.raises(MaskError, match="probability map"):
        encode_rle(np.full((2, 2), 0.3))


def test_a_fractional_size_error_says_why() -> None:
    with pytest.raises(MaskError, match="whole numbers, got 4.5"):
        decode_rle({"size": [4.5, 4], "counts": [7, 1, 4]})
    with pytest.raises(MaskError):
        decode_rle({"size": {0: 3, 1: 4}, "counts": [7, 1, 4]})  # a dict is not [H, W]
