# R101 — Python loop over array elements or rows.
# Code that must (# expect) and must not (# reject) produce it; tests/test_rules.py assesses it
# as module r101.py beside the other codes' fixtures (markers: tests/markers.py).

import itertools

import numpy as np


def r101_element_write(a: np.ndarray):
    out = np.empty_like(a)
    for i in range(len(a)):
        out[i] = a[i] * 2.0  # expect: R101
    return out


def r101_scalar_accumulation(a: np.ndarray, w: np.ndarray):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * w[i]  # expect: R101
    return total


def r101_tanh_accumulation(m: np.ndarray):
    acc = 0.0
    for i in range(m.shape[0]):
        acc += np.tanh(m[i, i])  # expect: R101
    return acc


def r101_row_broadcast(d: np.ndarray, w: np.ndarray):
    out = np.zeros_like(d)
    for i in range(d.shape[0]):
        out[i, :] = d[i, :] * w[i]  # expect: R101
    return out


def r101_sized_by_count(n):
    e = np.zeros(n)
    for i in range(n):
        e[i] = i * 0.5  # expect: R101
    return e


def r101_count_from_len(a: np.ndarray):
    n = len(a)
    out = np.zeros(n)
    for i in range(1, n - 1):
        out[i] = a[i - 1] + a[i + 1]  # expect: R101
    return out


def r101_nest(g: np.ndarray):
    n, m = g.shape
    for i in range(n):
        for j in range(m):
            g[i, j] -= 0.5  # expect: R101
            g[i, j] *= 2.0
    return g


def r101_lu(A: np.ndarray):
    n = A.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            A[i, j] -= A[i, :j] @ A[:j, j]  # expect: R101
    return A


def r101_product(g: np.ndarray):
    n, m = g.shape
    for i, j in itertools.product(range(n), range(m)):
        g[i, j] = 0.0  # expect: R101
    return g


def r101_two_nests(g: np.ndarray):
    for i in range(g.shape[0]):
        g[i] = 0.0  # expect: R101
    for j in range(g.shape[0]):
        g[j] = 1.0  # expect: R101
    return g


def r101_neg_taps(x: np.ndarray, c: np.ndarray, acc: np.ndarray):  # reject: R101
    w = x.shape[1] - c.shape[0] + 1
    for k in range(c.shape[0]):
        acc[:, :w] += c[k] * x[:, k : k + w]
    return acc


def r101_neg_taps_roll(x: np.ndarray, taps: np.ndarray):  # reject: R101
    y = np.zeros_like(x)
    for k in range(len(taps)):
        y += taps[k] * np.roll(x, k)
    return y


def r101_neg_time_steps(s0, g: np.ndarray, n_paths, n_steps):  # reject: R101
    p = np.empty((n_paths, n_steps))
    p[:, 0] = s0
    for t in range(1, n_steps):
        p[:, t] = p[:, t - 1] * g
    return p


def r101_neg_time_history(x: np.ndarray, n, n_steps):  # reject: R101
    p = np.zeros((n, n_steps))
    for t in range(n_steps):
        p[:, t] = np.sin(t * x)
    return p


def r101_neg_channels(v: np.ndarray, out: np.ndarray):  # reject: R101
    for c in range(3):
        out[c] = np.tanh(v[c])
    return out


def r101_neg_recurrence(x: np.ndarray, a):  # reject: R101
    y = np.zeros(len(x))
    for n in range(1, len(x)):
        y[n] = a * y[n - 1] + x[n]
    return y


def r101_neg_epochs(w: np.ndarray, X: np.ndarray, y: np.ndarray, n_epochs, lr):  # reject: R101
    for _ in range(n_epochs):
        w -= lr * (X.T @ (X @ w - y))
    return w
