"""NonMaxSuppression, RoiAlign, GridSample and MaxUnpool (onnx/ops_detection.cpp) against numpy
references written from ONNX's definitions (float64 loops), hand-computed values and invariants
(an identity grid reproduces the image in every mode); NMS with tied scores, both box formats,
max_output_boxes_per_class 0 and its host fallback counted off cpu; bad inputs. On cpu and every
other loaded backend."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import tinyfin.onnx as tfo
from conftest import make_model, other_backends, rng, value

F, I64 = TensorProto.FLOAT, TensorProto.INT64
ET = {np.dtype(np.float32): F, np.dtype(np.int64): I64}
BACKENDS = ["cpu"] + other_backends()


def run_node(op, feeds, out_type, backend="cpu", opset=16, **attrs):
    names = [n if a is not None else "" for n, a in feeds.items()]
    inputs = [value(n, ET[a.dtype], a.shape) for n, a in feeds.items() if a is not None]
    node = helper.make_node(op, names, ["y"], name="d", **attrs)
    model = make_model([node], inputs, [value("y", out_type, None)], opset=opset)
    sess = tfo.InferenceSession(model.SerializeToString(), backend=backend, shape_inference=False)
    out = sess.run(None, {n: a for n, a in feeds.items() if a is not None})[0]
    return out, sess


# ---- NonMaxSuppression ----

def nms_ref(boxes, scores, max_out, iou_threshold, score_threshold, center):
    def corners(b):
        if center:
            return b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2
        return min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])

    def iou(p, q):
        (ay1, ax1, ay2, ax2), (by1, bx1, by2, bx2) = corners(p), corners(q)
        ih, iw = min(ay2, by2) - max(ay1, by1), min(ax2, bx2) - max(ax1, bx1)
        if ih <= 0 or iw <= 0:
            return 0.0
        inter = ih * iw
        area_a, area_b = (ay2 - ay1) * (ax2 - ax1), (by2 - by1) * (bx2 - bx1)
        return inter / (area_a + area_b - inter)

    out = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            # The threshold is a float32 input, compared with float32 scores.
            cand = [i for i in range(boxes.shape[1])
                    if score_threshold is None or s[i] > np.float32(score_threshold)]
            cand.sort(key=lambda i: (-s[i], i))  # highest first, ties by index
            kept = []
            for i in cand:
                if len(kept) >= max_out:
                    break
                if all(iou(boxes[b, i], boxes[b, k]) <= iou_threshold for k in kept):
                    kept.append(i)
            out += [[b, c, k] for k in kept]
    return np.array(out, np.int64).reshape(-1, 3)


def nms_feeds(boxes, scores, max_out, iou, score):
    return {"boxes": boxes, "scores": scores, "max": np.array([max_out], np.int64),
            "iou": np.array([iou], np.float32), "score": None if score is None else np.array([score], np.float32)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("max_out, iou, score", [(3, 0.4, None), (10, 0.2, 0.3), (1, 0.6, 0.0), (0, 0.5, None)])
def test_nms_matches_reference(backend, center, max_out, iou, score):
    g = rng(10 + center)
    xy = g.uniform(0, 4, size=(2, 12, 2))
    wh = g.uniform(0.5, 2.5, size=(2, 12, 2))
    boxes = (np.concatenate([xy, wh], -1) if center else
             np.concatenate([xy[..., ::-1], xy[..., ::-1] + wh], -1)).astype(np.float32)
    boxes[0, 5] = boxes[0, 2]  # an identical box
    scores = np.round(g.uniform(0, 1, size=(2, 3, 12)), 1).astype(np.float32)  # many ties
    out, sess = run_node("NonMaxSuppression", nms_feeds(boxes, scores, max_out, iou, score), I64, backend,
                         center_point_box=center)
    np.testing.assert_array_equal(out, nms_ref(boxes.astype(np.float64), scores, max_out, iou, score, center))
    if max_out == 0:
        assert out.shape == (0, 3)
    elif backend != "cpu":
        assert sess.last_run()["fallbacks"] >= 1  # computed on the host, counted
    else:
        assert sess.last_run()["fallbacks"] == 0


def test_nms_ties_keep_the_lower_index_and_flipped_corners():
    # Boxes 0 and 1 coincide (1 has its corners swapped) with equal scores: 0 is kept, 1 suppressed;
    # 2 does not overlap; 3 has no area and never suppresses.
    boxes = np.array([[[0, 0, 1, 1], [1, 1, 0, 0], [0, 2, 1, 3], [0, 0, 0, 0]]], np.float32)
    scores = np.array([[[0.9, 0.9, 0.9, 0.95]]], np.float32)
    out, _ = run_node("NonMaxSuppression", nms_feeds(boxes, scores, 10, 0.5, None), I64)
    assert out.tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 2]]


def test_nms_bad_shapes_are_model_errors():
    with pytest.raises(tfo.ModelError, match=r"node 'd' \(NonMaxSuppression.*scores"):
        run_node("NonMaxSuppression", nms_feeds(np.zeros((1, 3, 4), np.float32), np.zeros((1, 2, 4), np.float32),
                                                1, 0.5, None), I64)


# ---- GridSample ----

def grid_sample_ref(x, grid, mode, padding, align_corners):
    n, c, h, w = x.shape
    _, ho, wo, _ = grid.shape

    def unnorm(v, size):
        return (v + 1) / 2 * (size - 1) if align_corners else ((v + 1) * size - 1) / 2

    def reflect(v, lo, hi):  # into [lo, hi]
        if lo == hi:
            return 0.0
        span = hi - lo
        v = abs(v - lo)
        k, r = divmod(v, span)
        return lo + r if int(k) % 2 == 0 else hi - r

    def padded(v, size):
        if padding == "border":
            return min(max(v, 0), size - 1)
        if padding == "reflection":
            v = reflect(v, 0, size - 1) if align_corners else reflect(v, -0.5, size - 0.5)
            return min(max(v, 0), size - 1)
        return v

    def at(b, yi, xi):
        return x[b, :, yi, xi] if 0 <= yi < h and 0 <= xi < w else np.zeros(c)

    def cubic(t):
        a = -0.75
        t = abs(t)
        if t <= 1:
            return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
        if t < 2:
            return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
        return 0.0

    y = np.zeros((n, c, ho, wo))
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                ux, uy = unnorm(float(grid[b, i, j, 0]), w), unnorm(float(grid[b, i, j, 1]), h)
                if mode == "bicubic":
                    x0, y0 = math.floor(ux), math.floor(uy)
                    for dy in range(-1, 3):
                        for dx in range(-1, 3):
                            yy, xx = int(padded(y0 + dy, h)), int(padded(x0 + dx, w))
                            y[b, :, i, j] += cubic(ux - (x0 + dx)) * cubic(uy - (y0 + dy)) * at(b, yy, xx)
                    continue
                px, py = padded(ux, w), padded(uy, h)
                if mode == "nearest":
                    y[b, :, i, j] = at(b, int(np.rint(py)), int(np.rint(px)))
                    continue
                x0, y0 = math.floor(px), math.floor(py)
                for yy in (y0, y0 + 1):
                    for xx in (x0, x0 + 1):
                        y[b, :, i, j] += (1 - abs(px - xx)) * (1 - abs(py - yy)) * at(b, yy, xx)
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_matches_reference(backend, mode, padding, align_corners):
    g = rng(20)
    x = g.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = g.uniform(-1.6, 1.6, size=(2, 3, 4, 2)).astype(np.float32)
    grid[0, 0, 0] = [-1, -1]
    grid[0, 0, 1] = [1, 1]
    grid[1, 2, 3] = [0.1, -0.35]  # exactly halfway between pixels for nearest (align_corners 0, w 5)
    out, _ = run_node("GridSample", {"x": x, "grid": grid}, F, backend, mode=mode, padding_mode=padding,
                      align_corners=align_corners)
    np.testing.assert_allclose(out, grid_sample_ref(x.astype(np.float64), grid, mode, padding, align_corners),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_identity_grid_and_hand_values(mode):
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    ys, xs = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 4), indexing="ij")
    grid = np.stack([xs, ys], -1)[None].astype(np.float32)
    out, _ = run_node("GridSample", {"x": x, "grid": grid}, F, mode=mode, align_corners=1)
    np.testing.assert_allclose(out, x, atol=1e-5)
    # The image's centre of [[1, 2], [3, 4]] without align_corners: the mean, pixel (0, 0) for
    # nearest (0.5 rounds to even), and for bicubic the inner taps' weight W(0.5) = 0.59375 squared
    # times 1 + 2 + 3 + 4 (the outer taps, W(1.5) = -0.09375, read zeros).
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    out, _ = run_node("GridSample", {"x": x, "grid": np.zeros((1, 1, 1, 2), np.float32)}, F, mode=mode)
    assert out.item() == pytest.approx({"bilinear": 2.5, "nearest": 1.0, "bicubic": 3.525390625}[mode], abs=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_non_finite_and_huge_grid_values(mode, padding):
    # NaN and infinite grid coordinates read no pixel where the reflection is taken (PyTorch's
    # sampler reads nothing there: 0); the rest as the reference says, a huge finite coordinate
    # included (its reflection's parity taken without an integer overflow).
    x = rng(21).standard_normal((1, 2, 3, 4)).astype(np.float32)
    grid = np.array([[[[0.2, -0.3], [1e30, 0.5], [-3e38, -3e38], [0.7, 0.1]]]], np.float32)
    out, _ = run_node("GridSample", {"x": x, "grid": grid}, F, mode=mode, padding_mode=padding)
    finite = grid_sample_ref(x.astype(np.float64), grid, mode, padding, 0)
    np.testing.assert_allclose(out[..., [0, 3]], finite[..., [0, 3]], rtol=1e-5, atol=1e-5)
    assert np.isfinite(out).all()
    bad = np.array([[[[np.nan, 0.0], [0.0, np.inf], [-np.inf, np.nan]]]], np.float32)
    out, _ = run_node("GridSample", {"x": x, "grid": bad}, F, mode=mode, padding_mode=padding)
    assert out.shape == (1, 2, 1, 3)
    if padding != "border":  # border clamps an infinity onto the edge
        np.testing.assert_array_equal(out, 0)


def test_grid_sample_bad_grid_is_a_model_error():
    with pytest.raises(tfo.ModelError, match=r"node 'd' \(GridSample.*grid"):
        run_node("GridSample", {"x": np.zeros((1, 1, 2, 2), np.float32), "grid": np.zeros((1, 2, 2, 3), np.float32)},
                 F)


# ---- RoiAlign ----

def roi_align_ref(x, rois, batch, oh, ow, ratio, scale, mode, half_pixel):
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, oh, ow))
    off = 0.5 if half_pixel else 0.0
    for r, (roi, b) in enumerate(zip(rois.astype(np.float64), batch)):
        x1, y1, x2, y2 = roi * scale - off
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = ratio if ratio > 0 else math.ceil(rh / oh)
        gw = ratio if ratio > 0 else math.ceil(rw / ow)
        for ph in range(oh):
            for pw in range(ow):
                vals = []
                for iy in range(gh):
                    for ix in range(gw):
                        yy = y1 + ph * bh + (iy + 0.5) * bh / gh
                        xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                        if yy < -1 or yy > h or xx < -1 or xx > w:
                            vals.append([np.zeros(c)] * 4)
                            continue
                        yy, xx = max(yy, 0.0), max(xx, 0.0)
                        y0, x0 = int(yy), int(xx)
                        if y0 >= h - 1:
                            y0 = y1_ = h - 1
                            yy = float(y0)
                        else:
                            y1_ = y0 + 1
                        if x0 >= w - 1:
                            x0 = x1_ = w - 1
                            xx = float(x0)
                        else:
                            x1_ = x0 + 1
                        ly, lx = yy - y0, xx - x0
                        vals.append([(1 - ly) * (1 - lx) * x[b, :, y0, x0], (1 - ly) * lx * x[b, :, y0, x1_],
                                     ly * (1 - lx) * x[b, :, y1_, x0], ly * lx * x[b, :, y1_, x1_]])
                if mode == "avg":
                    out[r, :, ph, pw] = sum(sum(v) for v in vals) / max(gh * gw, 1)
                else:  # onnxruntime's (and ONNX's reference's) max: of the weighted taps
                    out[r, :, ph, pw] = np.max(np.array([t for v in vals for t in v]), axis=0)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_reference(backend, mode, transform, ratio):
    g = rng(30)
    x = g.standard_normal((2, 3, 6, 7)).astype(np.float32)
    rois = np.array([[0.5, 0.5, 5.0, 4.0], [1.2, 0.3, 3.1, 5.7], [-2, -1, 12, 10], [2, 2, 2.5, 2.2]], np.float32)
    batch = np.array([0, 1, 1, 0], np.int64)
    out, _ = run_node("RoiAlign", {"x": x, "rois": rois, "b": batch}, F, backend, mode=mode, output_height=2,
                      output_width=3, sampling_ratio=ratio, spatial_scale=0.9, coordinate_transformation_mode=transform)
    ref = roi_align_ref(x.astype(np.float64), rois, batch, 2, 3, ratio, 0.9, mode, transform == "half_pixel")
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_roi_align_constant_image_and_bad_batch_index():
    x = np.full((1, 2, 5, 5), 3.0, np.float32)
    out, _ = run_node("RoiAlign", {"x": x, "rois": np.array([[0.5, 1, 4, 4.5]], np.float32),
                                   "b": np.array([0], np.int64)}, F, output_height=2, output_width=2)
    np.testing.assert_allclose(out, 3.0, rtol=1e-6)
    with pytest.raises(tfo.ModelError, match=r"node 'd' \(RoiAlign.*batch index 1"):
        run_node("RoiAlign", {"x": x, "rois": np.zeros((1, 4), np.float32), "b": np.array([1], np.int64)}, F)


# ---- MaxUnpool ----

def max_pool_with_indices(x, k, s):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    vals, idx = np.zeros((n, c, oh, ow), x.dtype), np.zeros((n, c, oh, ow), np.int64)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        win = x[b, ch, i * s:i * s + k, j * s:j * s + k]
        p, q = np.unravel_index(np.argmax(win), win.shape)
        vals[b, ch, i, j] = win[p, q]
        idx[b, ch, i, j] = ((b * c + ch) * h + i * s + p) * w + j * s + q
    return vals, idx


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_unpool_inverts_max_pool(backend):
    x = rng(40).standard_normal((2, 3, 4, 6)).astype(np.float32)
    vals, idx = max_pool_with_indices(x, 2, 2)
    out, _ = run_node("MaxUnpool", {"x": vals, "i": idx}, F, backend, opset=11, kernel_shape=[2, 2], strides=[2, 2])
    ref = np.zeros(x.size, np.float32)
    ref[idx.ravel()] = vals.ravel()
    np.testing.assert_array_equal(out, ref.reshape(x.shape))
    # With output_shape one row and column larger (an odd input): the same coordinates.
    shape = np.array([2, 3, 5, 7], np.int64)
    out, _ = run_node("MaxUnpool", {"x": vals, "i": idx, "s": shape}, F, backend, opset=11, kernel_shape=[2, 2],
                      strides=[2, 2])
    big = np.zeros((2, 3, 5, 7), np.float32)
    big[:, :, :4, :6] = ref.reshape(x.shape)
    np.testing.assert_array_equal(out, big)


def test_max_unpool_index_out_of_range_is_a_model_error():
    with pytest.raises(tfo.ModelError, match=r"node 'd' \(MaxUnpool.*index 16"):
        run_node("MaxUnpool", {"x": np.ones((1, 1, 2, 2), np.float32), "i": np.array([[[[0, 1], [2, 16]]]], np.int64)},
                 F, opset=11, kernel_shape=[2, 2], strides=[2, 2])
