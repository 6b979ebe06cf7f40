//! The kernels' cycle formulas, as the planner evaluates them.
//!
//! Every shipped kernel declares its cost with `.ipub_cost` in its source
//! under `device/`, calibrated against the model device
//! (`tests/row_kernels/calibration.rs`). The planner needs the same figures
//! without assembling anything, so this module carries each formula's text
//! and evaluates it with the variant's defines and a run's parameters; a
//! test assembles every shipped variant and asserts that its `.ipub_cost`
//! is exactly the text here, so the two cannot drift apart. A kernel without
//! a formula here (one added since) gets `None`, and the planner falls back
//! to its generic vector estimate.

use crate::asm::CostFormula;
use crate::graph::DType;
use crate::graph::Reduction;
use crate::partition::{BinaryOp, KernelId, UnaryOp};
use std::collections::HashMap;
use std::sync::OnceLock;

const GEMM: &str = "cb = (C + 15) / 16; n = cb >= 6 ? R : (R + 6 / cb - 1) / (6 / cb); units = cb >= 6 ? (batch * cb + 5) / 6 : batch; kb = (K + (FP8 ? 31 : 15)) / (FP8 ? 32 : 16); 6 * units * (kb * ((INTERLEAVED ? 40 : 72) + (INTERLEAVED ? 4 : 12) * n) + (INTERLEAVED ? 44 : 16) + (INTERLEAVED && n == 1 ? 7 * kb - 7 - 12 * (units > 1) : 0)) + 360";
const CAST_TO_F8: &str = "n = rows * row_length; units = n / 8; tail = n % 8; 172 + 6 * (3 * (units / 6) + 4 * (units > 0) + (tail != 0 ? 15 + 3 * (tail & 3) + 4 * (tail >= 4) : 3 * (units % 6 != 0)))";
const CAST_FROM_F8: &str = "n = rows * row_length; units = n / 8; tail = n % 8; 178 + 6 * (3 * (units / 6) + 2 * (units > 0) + (tail != 0 ? 13 + 7 * (tail & 3) + 4 * (tail >= 4) : 3 * (units % 6 != 0)))";
const CAST_TO_F32: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 136 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 11 + 3 * tail : 3 * (units % 6 != 0)))";
const CAST_FROM_F32: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 142 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 15 + 6 * tail : 3 * (units % 6 != 0)))";
const ADD_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 154 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 16 + 6 * tail : 3 * (units % 6 != 0)))";
const ADD_F32: &str = "n = rows * row_length; units = n / 2; 154 + 6 * (3 * (units / 6) + (units > 0) + (n % 2 != 0 ? 14 : 3 * (units % 6 != 0)))";
const GELU_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 196 + 6 * (20 * (units / 6) + 2 * (units > 0) + (tail != 0 ? 29 + 6 * tail : 20 * (units % 6 != 0)))";
const GELU_TO_F8: &str = "n = rows * row_length; units = n / 4; tail = n % 4; a = 9 * (units / 6 + (units % 6 != 0)) + 5 * (units > 0); b = 9 * (units / 6) + 5 * (units >= 6) + (tail != 0 ? 19 + 3 * tail : 0); 228 + 6 * (a > b ? a : b)";
const ADD_GELU_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 230 + 6 * (21 * (units / 6) + 3 * (units > 0) + (tail != 0 ? 33 + 6 * tail : 21 * (units % 6 != 0)))";
const ADD_GELU_TO_F8: &str = "n = rows * row_length; units = n / 4; tail = n % 4; a = 10 * (units / 6 + (units % 6 != 0)) + 6 * (units > 0); b = 10 * (units / 6) + 6 * (units >= 6) + (tail != 0 ? 25 + 3 * tail : 0); 246 + 6 * (a > b ? a : b)";
const SOFTMAX_F16: &str = "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; 50 + 6 * (whole * (34 * row_length + 30 * singles + 360) + split * (16 * row_length + 12 * singles + 600 + 18 * (row_length + singles) / parts)) / 4";
const SOFTMAX_CAUSAL_F16: &str = "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; M = matrix_rows; f = first_row % M; end = f + rows; e = end % M; kept = end / M * (M <= row_length ? M * (M + 1) / 2 : row_length * (row_length + 1) / 2 + (M - row_length) * row_length) + (e <= row_length ? e * (e + 1) / 2 : row_length * (row_length + 1) / 2 + (e - row_length) * row_length) - (f <= row_length ? f * (f + 1) / 2 : row_length * (row_length + 1) / 2 + (f - row_length) * row_length); T = end / M * (M <= row_length ? M : row_length) + (e <= row_length ? e : row_length) - (f <= row_length ? f : row_length); tails = 3 * T / 4 + (row_length % 4 != 0) * (rows - T); P = row_length / parts; kp = kept / rows < P ? kept / rows : P; 240 + 6 * (whole * (400 + row_length) + (35 * kept + 200 * tails) * whole / rows + split * (640 + 18 * kept / rows + 15 * kp + (8 * kept / rows + row_length) / parts)) / 4";
const SOFTMAX_ONCE_F16: &str = "whole = (rows + 5) / 6; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : 5; 25 + 6 * (whole * (10 * row_length + 24 * singles + 340)) / 4";
const SOFTMAX_ONCE_CAUSAL_F16: &str = "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; M = matrix_rows; f = first_row % M; end = f + rows; e = end % M; kept = end / M * (M <= row_length ? M * (M + 1) / 2 : row_length * (row_length + 1) / 2 + (M - row_length) * row_length) + (e <= row_length ? e * (e + 1) / 2 : row_length * (row_length + 1) / 2 + (e - row_length) * row_length) - (f <= row_length ? f * (f + 1) / 2 : row_length * (row_length + 1) / 2 + (f - row_length) * row_length); T = end / M * (M <= row_length ? M : row_length) + (e <= row_length ? e : row_length) - (f <= row_length ? f : row_length); tails = 3 * T / 4 + (row_length % 4 != 0) * (rows - T); P = row_length / parts; kp = kept / rows < P ? kept / rows : P; 200 + 6 * (whole * (450 + row_length) + (7 * kept + 200 * tails) * whole / rows + split * (680 + 18 * kept / rows + 15 * kp + row_length / parts)) / 4";
const LAYERNORM_F16: &str = "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; misaligned = row_length % 2 != 0; row = misaligned ? 26 * row_length + 32 * singles : 22 * row_length + (row_length % 4 == 2 ? 70 : 38) * singles; part = misaligned && (rows % 6 >= 2 || rows / 6 * row_length % 2 == 1) ? 20 * row_length + 32 * singles : 16 * row_length + 24 * singles; 40 + 6 * (whole * (row + (row_length % 4 == 0 ? 360 : 396)) + split * (6 * row_length + 14 * singles + 620 + part / parts)) / 4";
const LAYERNORM_TO_F8: &str = "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; misaligned = row_length % 2 != 0; row = misaligned ? 27 * row_length + 32 * singles : 23 * row_length + (row_length % 4 == 2 ? 74 : 42) * singles; part = misaligned && (rows % 6 >= 2 || rows / 6 * row_length % 2 == 1) ? 20 * row_length + 48 * singles : 17 * row_length + 28 * singles; 80 + 6 * (whole * (row + (row_length % 4 == 0 ? 360 : 396)) + split * (6 * row_length + 14 * singles + 620 + part / parts)) / 4";
const LAYERNORM_STATS_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 == 2 ? 6 : row_length % 4 != 0 ? 3 : 0; 6 * (6 * share + 8 * rows + 4 * 74 * pieces + 4 * 25 + 8 * pieces * singles) / 4";
const LAYERNORM_PARTS_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 16) * share + 4 * (112 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 32 * (row_length % 4 == 2)) * pieces + 4 * 20) / 4";
const LAYERNORM_PARTS_TO_F8: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 17) * share + 4 * (116 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 34 * (row_length % 4 == 2)) * pieces + 4 * 25) / 4";
const LAYERNORM_PARTS_SEG_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 16) * share + 4 * (71 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 32 * (row_length % 4 == 2) + 11 * segments) * pieces + 4 * 20) / 4";
const LAYERNORM_PARTS_SEG_TO_F8: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 17) * share + 4 * (75 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 34 * (row_length % 4 == 2) + 11 * segments) * pieces + 4 * 25) / 4";
const RMSNORM_F16: &str = "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; misaligned = row_length % 2 != 0; row = misaligned ? 15 * row_length + 24 * singles : 14 * row_length + 20 * singles; part = misaligned && (rows % 6 >= 2 || rows / 6 * row_length % 2 == 1) ? 11 * row_length + 40 * singles : 11 * row_length + 24 * singles; 40 + 6 * (100 + whole * (row + (row_length % 4 == 0 ? 228 : 264)) + split * (3 * row_length + 12 * singles + 400 + part / parts)) / 4";
const RMSNORM_STATS_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 == 2 ? 6 : row_length % 4 != 0 ? 3 : 0; 6 * (3 * share + 16 * rows + 4 * 52 * pieces + 4 * 32 + 8 * pieces * singles) / 4";
const RMSNORM_PARTS_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; singles = row_length < 4 ? row_length : 0; 6 * ((misaligned ? 13 : 12) * share + 20 * rows + 4 * (40 + 12 * misaligned + 9 * (row_length % 4 != 0 && rows > 1) + 8 * (row_length % 4 == 2)) * pieces + 4 * 32 + 8 * pieces * singles) / 4";
const RMSNORM_PARTS_SEG_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; singles = row_length < 4 ? row_length : 0; 6 * ((misaligned ? 13 : 12) * share + 20 * rows + 4 * (39 + 12 * misaligned + 9 * (row_length % 4 != 0 && rows > 1) + 8 * (row_length % 4 == 2) + 4 * segments) * pieces + 4 * 32 + 12 * pieces * singles) / 4";
const SOFTMAX_STATS_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; 6 * (16 * share + 44 * rows + 4 * 59 * pieces + 150 + 8 * pieces * singles) / 4";
const SOFTMAX_PARTS_SEG_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; 6 * (18 * share + 40 * rows + 4 * (32 + 7 * segments) * pieces + 180) / 4";
const FOLD_NORM: &str = "f = (rows + 5) / 6; 6 * (20 + f * 74)";
const FOLD_SOFTMAX: &str = "f = (rows + 5) / 6; 6 * (20 + f * 57)";
const SOFTMAX_STATS_ONCE_F16: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; 6 * (8 * share + 44 * rows + 4 * 62 * pieces + 150 + 12 * pieces * singles) / 4";
const SOFTMAX_PARTS_ONCE_TO_F8: &str = "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; h0 = e0 / row_length > (s0 + row_length - 1) / row_length ? e0 / row_length - (s0 + row_length - 1) / row_length : 0; c0 = 82 * p0 - 49 * h0; h1 = e1 / row_length > (s1 + row_length - 1) / row_length ? e1 / row_length - (s1 + row_length - 1) / row_length : 0; c1 = 82 * p1 - 49 * h1; h2 = e2 / row_length > (s2 + row_length - 1) / row_length ? e2 / row_length - (s2 + row_length - 1) / row_length : 0; c2 = 82 * p2 - 49 * h2; h3 = e3 / row_length > (s3 + row_length - 1) / row_length ? e3 / row_length - (s3 + row_length - 1) / row_length : 0; c3 = 82 * p3 - 49 * h3; h4 = e4 / row_length > (s4 + row_length - 1) / row_length ? e4 / row_length - (s4 + row_length - 1) / row_length : 0; c4 = 82 * p4 - 49 * h4; h5 = e5 / row_length > (s5 + row_length - 1) / row_length ? e5 / row_length - (s5 + row_length - 1) / row_length : 0; c5 = 82 * p5 - 49 * h5; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; k01 = c0 > c1 ? c0 : c1; k23 = c2 > c3 ? c2 : c3; k45 = c4 > c5 ? c4 : c5; k03 = k01 > k23 ? k01 : k23; work = k03 > k45 ? k03 : k45; singles = row_length < 4 ? 0 : row_length % 4 != 0 ? 3 : 0; 6 * (3 * share + 40 * rows + 4 * work + 180 + 12 * pieces * singles) / 4";
const REARRANGE_BLOCK_MAJOR_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 136 + 6 * (2 * (units / 6) + (units > 0) + (tail != 0 ? 12 + 6 * tail : 2 * (units % 6 != 0)))";
const REARRANGE_BLOCKS: &str = "words == 2 || words == 4 ? (inner == 1 ? 12 * words * ((outer + 5) / 6) + 228 : (outer + 5) / 6 * 6 * (inner * 2 * words + 9) + 198) : (outer + 5) / 6 * 6 * (inner * (words * 2 + 5) + 10) + 190";
const GEMM_F32_OUT: &str = "cb = (C + 15) / 16; n = cb >= 6 ? R : (R + 6 / cb - 1) / (6 / cb); units = cb >= 6 ? (batch * cb + 5) / 6 : batch; 6 * units * (((K + 15) / 16) * ((INTERLEAVED ? 44 : 76) + 20 * n) - 8 * n + 20) + 360";
const REDUCE_ADD_F32: &str = "blocks = (length / 4 + 5) / 6; 6 * blocks * (2 * count + 8) + 156";
const REDUCE_ADD_TO_F8: &str = "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 3 * blocks + 12 : blocks * (unrolled ? count + 5 : count + 7) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 11)";
const REDUCE_ADD_F16: &str = "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 3 * blocks + 5 : blocks * (unrolled ? count + 4 : count + 6) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 2)";
const REDUCE_ADD_PLUS1_F16: &str = "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 4 * blocks + 8 : blocks * (unrolled ? count + 5 : count + 7) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 5)";
const REDUCE_ADD_PLUS2_F16: &str = "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 5 * blocks + 10 : blocks * (unrolled ? count + 6 : count + 8) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 7)";
const SOFTMAX_MASK_STATS_F16: &str = "stats = MASK_F32 ? 27 : 31; single = MASK_F32 ? 12 : 16; n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; 6 * (stats * share + 50 * rows + 4 * 47 * pieces + 152 + single * pieces * singles) / 4";
const SOFTMAX_MASK_PARTS_SEG_F16: &str = "out = MASK_F32 ? 22 : 24; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; 6 * (out * share + 45 * rows + 4 * (24 + 7 * segments) * pieces + 207 + 4 * pieces * singles) / 4";
const SUM_F16_PARTIAL: &str = "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; singles = rest < 4 ? 8 * rest : piece % 4 == 0 && row_length % 4 == 0 ? 0 : row_length % 2 == 1 || piece % 2 == 1 ? 21 : 14; 6 * (busy * (4 * 34 + rest + singles) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4";
const MAX_F16_PARTIAL: &str = "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; singles = rest < 4 ? 8 * rest : piece % 4 == 0 && row_length % 4 == 0 ? 0 : row_length % 2 == 1 || piece % 2 == 1 ? 21 : 14; 6 * (busy * (4 * 35 + rest + singles) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4";
const SUM_PARTIALS_F16: &str =
    "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2";
const MEAN_PARTIALS_F16: &str =
    "busy = (rows + 5) / 6; 132 + 6 * busy * (2 * 26 + row_length + 2 * (row_length % 2)) / 2";
const MAX_PARTIALS_F16: &str =
    "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2";
const MEAN_PARTIALS_F32: &str =
    "busy = (rows + 5) / 6; 132 + 6 * busy * (2 * 26 + row_length + 2 * (row_length % 2)) / 2";
const SUM_F32_PARTIAL: &str = "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; 6 * (busy * (4 * 34 + 2 * rest + 4 * (rest % 2)) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4";
const MAX_F32_PARTIAL: &str = "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; 6 * (busy * (4 * 34 + 2 * rest + 4 * (rest % 2)) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4";
const SOFTMAX_MASK_F16: &str = "stats = MASK_F32 ? 27 : 31; out = MASK_F32 ? 22 : 24; single = MASK_F32 ? 35 : 41; split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; last = row_length - (parts - 1) * 4 * (row_length / 4 / parts); singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : 3; 150 + 6 * (whole * ((stats + out) * row_length + single * singles + 356) + split * (stats * row_length + out * last + single * singles + 464)) / 4";
const SILU_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 190 + 6 * (25 * (units / 6) + (units > 0) + (tail != 0 ? 34 + 6 * tail : 25 * (units % 6 != 0)))";
const SILU_F32: &str = "n = rows * row_length; units = n / 2; 190 + 6 * (11 * (units / 6) + (units > 0) + (n % 2 != 0 ? 18 : 11 * (units % 6 != 0)))";
const GELU_TANH_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 190 + 6 * (31 * (units / 6) + (units > 0) + (tail != 0 ? 40 + 6 * tail : 31 * (units % 6 != 0)))";
const GELU_TANH_F32: &str = "n = rows * row_length; units = n / 2; 190 + 6 * (15 * (units / 6) + (units > 0) + (n % 2 != 0 ? 21 : 15 * (units % 6 != 0)))";
const BINARY_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 154 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 16 + 6 * tail : 3 * (units % 6 != 0)))";
const BINARY_F32: &str = "n = rows * row_length; units = n / 2; 154 + 6 * (3 * (units / 6) + (units > 0) + (n % 2 != 0 ? 14 : 3 * (units % 6 != 0)))";
const DIV_F16: &str = "n = rows * row_length; units = n / 4; tail = n % 4; 154 + 6 * (16 * (units / 6) + (units > 0) + (tail != 0 ? 26 + 6 * tail : 16 * (units % 6 != 0)))";
const DIV_F32: &str = "n = rows * row_length; units = n / 2; 154 + 6 * (6 * (units / 6) + (units > 0) + (n % 2 != 0 ? 15 : 6 * (units % 6 != 0)))";
const REDUCE_SUM_F16: &str = "busy = (rows + 5) / 6; singles = row_length < 4 ? 8 * row_length : row_length % 4 == 0 ? 0 : row_length % 2 == 1 ? 21 : 14; 102 + 6 * busy * (4 * 28 + row_length + singles) / 4";
const REDUCE_MEAN_F16: &str = "busy = (rows + 5) / 6; singles = row_length < 4 ? 8 * row_length : row_length % 4 == 0 ? 0 : row_length % 2 == 1 ? 21 : 14; 114 + 6 * busy * (4 * 30 + row_length + singles) / 4";
const REDUCE_MAX_F16: &str = "busy = (rows + 5) / 6; singles = row_length < 4 ? 8 * row_length : row_length % 4 == 0 ? 0 : row_length % 2 == 1 ? 21 : 14; 102 + 6 * busy * (4 * 29 + row_length + singles) / 4";
const REDUCE_SUM_F32: &str =
    "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2";
const REDUCE_MEAN_F32: &str =
    "busy = (rows + 5) / 6; 132 + 6 * busy * (2 * 26 + row_length + 2 * (row_length % 2)) / 2";
const REDUCE_MAX_F32: &str =
    "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2";

/// The `.ipub_cost` text of `kernel`'s shipped source, if this module
/// knows it.
pub(super) fn formula(kernel: KernelId) -> Option<&'static str> {
    use DType::{F143, F152, F16, F32};
    Some(match kernel {
        KernelId::Gemm { .. } => GEMM,
        KernelId::Cast {
            from: F16,
            to: F143 | F152,
        } => CAST_TO_F8,
        KernelId::Cast {
            from: F143 | F152,
            to: F16,
        } => CAST_FROM_F8,
        KernelId::Cast { from: F16, to: F32 } => CAST_TO_F32,
        KernelId::Cast { from: F32, to: F16 } => CAST_FROM_F32,
        KernelId::Add { dtype: F16 } => ADD_F16,
        KernelId::Add { dtype: F32 } => ADD_F32,
        KernelId::Gelu {
            dtype: F16,
            add: false,
        } => GELU_F16,
        KernelId::GeluCast {
            to: F143 | F152,
            add: false,
        } => GELU_TO_F8,
        KernelId::Gelu {
            dtype: F16,
            add: true,
        } => ADD_GELU_F16,
        KernelId::GeluCast {
            to: F143 | F152,
            add: true,
        } => ADD_GELU_TO_F8,
        KernelId::Softmax {
            dtype: F16,
            causal: false,
            exp_once: false,
        } => SOFTMAX_F16,
        KernelId::Softmax {
            dtype: F16,
            causal: true,
            exp_once: false,
        } => SOFTMAX_CAUSAL_F16,
        KernelId::Softmax {
            dtype: F16,
            causal: false,
            exp_once: true,
        } => SOFTMAX_ONCE_F16,
        KernelId::Softmax {
            dtype: F16,
            causal: true,
            exp_once: true,
        } => SOFTMAX_ONCE_CAUSAL_F16,
        KernelId::Layernorm { dtype: F16 } => LAYERNORM_F16,
        KernelId::LayernormCast { to: F143 | F152 } => LAYERNORM_TO_F8,
        KernelId::LayernormStats => LAYERNORM_STATS_F16,
        KernelId::LayernormParts {
            out: F16,
            segmented,
        } => {
            if segmented {
                LAYERNORM_PARTS_SEG_F16
            } else {
                LAYERNORM_PARTS_F16
            }
        }
        KernelId::LayernormParts {
            out: F143 | F152,
            segmented,
        } => {
            if segmented {
                LAYERNORM_PARTS_SEG_TO_F8
            } else {
                LAYERNORM_PARTS_TO_F8
            }
        }
        KernelId::Rmsnorm { dtype: F16 } => RMSNORM_F16,
        KernelId::RmsnormStats => RMSNORM_STATS_F16,
        KernelId::RmsnormParts { segmented: false } => RMSNORM_PARTS_F16,
        KernelId::RmsnormParts { segmented: true } => RMSNORM_PARTS_SEG_F16,
        KernelId::SoftmaxStats { exp_once: false } => SOFTMAX_STATS_F16,
        KernelId::SoftmaxStats { exp_once: true } => SOFTMAX_STATS_ONCE_F16,
        KernelId::SoftmaxPartsOnce { out: F143 | F152 } => SOFTMAX_PARTS_ONCE_TO_F8,
        KernelId::SoftmaxParts => SOFTMAX_PARTS_SEG_F16,
        KernelId::FoldRecords { softmax: false } => FOLD_NORM,
        KernelId::FoldRecords { softmax: true } => FOLD_SOFTMAX,
        KernelId::RearrangeBlockMajor { dtype: F16, .. } => REARRANGE_BLOCK_MAJOR_F16,
        KernelId::RearrangeBlocks => REARRANGE_BLOCKS,
        KernelId::ReduceAdd => REDUCE_ADD_F16,
        KernelId::ReduceAddPlus { addends: 1 } => REDUCE_ADD_PLUS1_F16,
        KernelId::ReduceAddPlus { addends: 2 } => REDUCE_ADD_PLUS2_F16,
        KernelId::ReduceCast { to: F143 | F152 } => REDUCE_ADD_TO_F8,
        KernelId::GemmF32Out { .. } => GEMM_F32_OUT,
        KernelId::ReduceAddF32 => REDUCE_ADD_F32,
        KernelId::SoftmaxMasked {
            dtype: F16,
            mask: F16 | F32,
        } => SOFTMAX_MASK_F16,
        KernelId::SoftmaxMaskedStats { mask: F16 | F32 } => SOFTMAX_MASK_STATS_F16,
        KernelId::SoftmaxMaskedParts { mask: F16 | F32 } => SOFTMAX_MASK_PARTS_SEG_F16,
        KernelId::ReduceRows { reduction, dtype } => match (reduction, dtype) {
            (Reduction::Sum, F16) => REDUCE_SUM_F16,
            (Reduction::Mean, F16) => REDUCE_MEAN_F16,
            (Reduction::Max, F16) => REDUCE_MAX_F16,
            (Reduction::Sum, F32) => REDUCE_SUM_F32,
            (Reduction::Mean, F32) => REDUCE_MEAN_F32,
            (Reduction::Max, F32) => REDUCE_MAX_F32,
            _ => return None,
        },
        KernelId::ReducePartial { reduction, dtype } => match (reduction, dtype) {
            (Reduction::Sum, F16) => SUM_F16_PARTIAL,
            (Reduction::Max, F16) => MAX_F16_PARTIAL,
            (Reduction::Sum, F32) => SUM_F32_PARTIAL,
            (Reduction::Max, F32) => MAX_F32_PARTIAL,
            _ => return None,
        },
        KernelId::ReducePartials { reduction, out } => match (reduction, out) {
            (Reduction::Sum, F16) => SUM_PARTIALS_F16,
            (Reduction::Mean, F16) => MEAN_PARTIALS_F16,
            (Reduction::Max, F16) => MAX_PARTIALS_F16,
            (Reduction::Mean, F32) => MEAN_PARTIALS_F32,
            _ => return None,
        },
        KernelId::Unary { op, dtype } => match (op, dtype) {
            (UnaryOp::Silu, F16) => SILU_F16,
            (UnaryOp::Silu, F32) => SILU_F32,
            (UnaryOp::GeluTanh, F16) => GELU_TANH_F16,
            (UnaryOp::GeluTanh, F32) => GELU_TANH_F32,
            _ => return None,
        },
        KernelId::Binary { op, dtype } => match (op, dtype) {
            (BinaryOp::Mul | BinaryOp::Sub, F16) => BINARY_F16,
            (BinaryOp::Mul | BinaryOp::Sub, F32) => BINARY_F32,
            (BinaryOp::Div, F16) => DIV_F16,
            (BinaryOp::Div, F32) => DIV_F32,
            _ => return None,
        },
        _ => return None,
    })
}

/// The defines `kernel`'s variant is assembled with that its formula may
/// name ([`crate::pipeline::kernels::variant_of`] sets the same).
fn defines(kernel: KernelId) -> Vec<(&'static str, i64)> {
    match kernel {
        KernelId::Gemm {
            fp8,
            interleaved,
            k,
            c,
            r,
        } => vec![
            ("FP8", i64::from(fp8)),
            ("INTERLEAVED", i64::from(interleaved)),
            ("K", i64::from(k)),
            ("C", i64::from(c)),
            ("R", i64::from(r)),
        ],
        KernelId::Softmax {
            causal, exp_once, ..
        } => vec![
            ("CAUSAL", i64::from(causal)),
            ("EXP_ONCE", i64::from(exp_once)),
        ],
        KernelId::GemmF32Out {
            interleaved,
            k,
            c,
            r,
        } => vec![
            ("INTERLEAVED", i64::from(interleaved)),
            ("K", i64::from(k)),
            ("C", i64::from(c)),
            ("R", i64::from(r)),
        ],
        KernelId::SoftmaxMasked { mask, .. }
        | KernelId::SoftmaxMaskedStats { mask }
        | KernelId::SoftmaxMaskedParts { mask } => {
            vec![("MASK_F32", i64::from(mask == DType::F32))]
        }
        KernelId::RearrangeBlockMajor { rows, cols, .. } => {
            vec![("BLOCK_ROWS", rows as i64), ("BLOCK_COLS", cols as i64)]
        }
        _ => Vec::new(),
    }
}

/// Every formula, parsed once per process: the planner evaluates them for
/// every candidate. A formula that does not parse is left out (the test
/// below parses them all), so its kernel costs `None`.
fn parsed(text: &'static str) -> Option<&'static CostFormula> {
    static PARSED: OnceLock<HashMap<&'static str, CostFormula>> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            ALL.iter()
                .filter_map(|&text| Some((text, CostFormula::parse(text).ok()?)))
                .collect()
        })
        .get(text)
}

const ALL: [&str; 65] = [
    GEMM,
    CAST_TO_F8,
    CAST_FROM_F8,
    CAST_TO_F32,
    CAST_FROM_F32,
    ADD_F16,
    ADD_F32,
    GELU_F16,
    GELU_TO_F8,
    ADD_GELU_F16,
    ADD_GELU_TO_F8,
    SOFTMAX_F16,
    SOFTMAX_CAUSAL_F16,
    SOFTMAX_ONCE_F16,
    SOFTMAX_ONCE_CAUSAL_F16,
    LAYERNORM_F16,
    LAYERNORM_TO_F8,
    LAYERNORM_STATS_F16,
    LAYERNORM_PARTS_F16,
    LAYERNORM_PARTS_TO_F8,
    LAYERNORM_PARTS_SEG_F16,
    LAYERNORM_PARTS_SEG_TO_F8,
    RMSNORM_F16,
    RMSNORM_STATS_F16,
    RMSNORM_PARTS_F16,
    RMSNORM_PARTS_SEG_F16,
    SOFTMAX_STATS_F16,
    SOFTMAX_PARTS_SEG_F16,
    FOLD_NORM,
    FOLD_SOFTMAX,
    SOFTMAX_STATS_ONCE_F16,
    SOFTMAX_PARTS_ONCE_TO_F8,
    REARRANGE_BLOCK_MAJOR_F16,
    REARRANGE_BLOCKS,
    REDUCE_ADD_F16,
    REDUCE_ADD_PLUS1_F16,
    REDUCE_ADD_PLUS2_F16,
    REDUCE_ADD_TO_F8,
    GEMM_F32_OUT,
    REDUCE_ADD_F32,
    SOFTMAX_MASK_F16,
    MAX_F32_PARTIAL,
    SUM_F32_PARTIAL,
    MEAN_PARTIALS_F32,
    MAX_PARTIALS_F16,
    MEAN_PARTIALS_F16,
    SUM_PARTIALS_F16,
    MAX_F16_PARTIAL,
    SUM_F16_PARTIAL,
    SOFTMAX_MASK_STATS_F16,
    SOFTMAX_MASK_PARTS_SEG_F16,
    SILU_F16,
    SILU_F32,
    GELU_TANH_F16,
    GELU_TANH_F32,
    BINARY_F16,
    BINARY_F32,
    DIV_F16,
    DIV_F32,
    REDUCE_SUM_F16,
    REDUCE_MEAN_F16,
    REDUCE_MAX_F16,
    REDUCE_SUM_F32,
    REDUCE_MEAN_F32,
    REDUCE_MAX_F32,
];

/// The cycles of one run of `kernel` with `params` (the run's parameters
/// by name, as lowering gives them), by its shipped formula; `None` when
/// this module has no formula for the kernel or the formula cannot be
/// evaluated with these names (a negative result included).
pub(super) fn cycles(kernel: KernelId, params: &[(&str, i64)]) -> Option<u64> {
    let formula = parsed(formula(kernel)?)?;
    let defines = defines(kernel);
    let value = formula
        .eval(&|name| {
            params
                .iter()
                .chain(&defines)
                .find(|(n, _)| *n == name)
                .map(|&(_, v)| v)
        })
        .ok()?;
    u64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{self, EntryMetadata};
    use crate::target::IPU21;
    use std::collections::BTreeMap;

    /// Every shipped variant the planner can name.
    fn shipped() -> Vec<KernelId> {
        use DType::{F143, F152, F16, F32};
        let mut all = Vec::new();
        for fp8 in [false, true] {
            for interleaved in [false, true] {
                all.push(KernelId::Gemm {
                    fp8,
                    interleaved,
                    k: 96,
                    c: 48,
                    r: 99,
                });
            }
        }
        for (from, to) in [
            (F16, F143),
            (F16, F152),
            (F143, F16),
            (F152, F16),
            (F16, F32),
            (F32, F16),
        ] {
            all.push(KernelId::Cast { from, to });
        }
        all.extend([KernelId::Add { dtype: F16 }, KernelId::Add { dtype: F32 }]);
        for add in [false, true] {
            all.push(KernelId::Gelu { dtype: F16, add });
            all.push(KernelId::GeluCast { to: F143, add });
            all.push(KernelId::GeluCast { to: F152, add });
        }
        for segmented in [false, true] {
            all.push(KernelId::RmsnormParts { segmented });
            for out in [F16, F143, F152] {
                all.push(KernelId::LayernormParts { out, segmented });
            }
        }
        all.extend([
            KernelId::LayernormStats,
            KernelId::RmsnormStats,
            KernelId::SoftmaxStats { exp_once: false },
            KernelId::SoftmaxStats { exp_once: true },
            KernelId::SoftmaxParts,
            KernelId::SoftmaxPartsOnce { out: F143 },
            KernelId::SoftmaxPartsOnce { out: F152 },
            KernelId::FoldRecords { softmax: false },
            KernelId::FoldRecords { softmax: true },
        ]);
        for causal in [false, true] {
            for exp_once in [false, true] {
                all.push(KernelId::Softmax {
                    dtype: F16,
                    causal,
                    exp_once,
                });
            }
        }
        all.extend([
            KernelId::Layernorm { dtype: F16 },
            KernelId::LayernormCast { to: F143 },
            KernelId::LayernormCast { to: F152 },
            KernelId::Rmsnorm { dtype: F16 },
            KernelId::RearrangeBlockMajor {
                dtype: F16,
                rows: 16,
                cols: 8,
            },
            KernelId::RearrangeBlocks,
            KernelId::ReduceAdd,
            KernelId::ReduceAddPlus { addends: 1 },
            KernelId::ReduceAddPlus { addends: 2 },
            KernelId::ReduceCast { to: F143 },
            KernelId::ReduceCast { to: F152 },
            KernelId::SoftmaxMasked {
                dtype: F16,
                mask: F16,
            },
            KernelId::SoftmaxMasked {
                dtype: F16,
                mask: F32,
            },
        ]);
        for mask in [F16, F32] {
            all.push(KernelId::SoftmaxMaskedStats { mask });
            all.push(KernelId::SoftmaxMaskedParts { mask });
        }
        for interleaved in [false, true] {
            all.push(KernelId::GemmF32Out {
                interleaved,
                k: 96,
                c: 48,
                r: 99,
            });
        }
        all.push(KernelId::ReduceAddF32);
        for reduction in [Reduction::Sum, Reduction::Mean, Reduction::Max] {
            for dtype in [F16, F32] {
                all.push(KernelId::ReduceRows { reduction, dtype });
                all.push(crate::partition::reduce_partial(reduction, dtype));
                all.push(crate::partition::reduce_partials(reduction, dtype));
            }
        }
        for dtype in [F16, F32] {
            for op in [UnaryOp::Silu, UnaryOp::GeluTanh] {
                all.push(KernelId::Unary { op, dtype });
            }
            for op in [BinaryOp::Mul, BinaryOp::Sub, BinaryOp::Div] {
                all.push(KernelId::Binary { op, dtype });
            }
        }
        all
    }

    /// The entry metadata of `kernel` assembled from `device/`.
    fn assembled(kernel: KernelId) -> EntryMetadata {
        let device = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("device");
        let variant = crate::pipeline::kernels::variant_of(kernel, &device)
            .unwrap_or_else(|| panic!("no shipped source provides {kernel}"));
        let pre = crate::asm::preprocess(
            &crate::vfs::OsFs,
            &variant.source,
            &variant.defines,
            &variant.include_dirs,
        );
        let compiled = kernels::compile_preprocessed(pre, &variant, &IPU21, "test")
            .unwrap_or_else(|e| panic!("{kernel}: {e}"));
        let entry = variant.entry.expect("shipped variants name their entry");
        let metadata = compiled.metadata;
        let found = metadata.entries.into_iter().find(|e| e.symbol == entry);
        found.unwrap_or_else(|| panic!("{kernel} has no entry {entry}"))
    }

    /// The planner's formulas are the shipped kernels' formulas, word for
    /// word, and bind the same defines: evaluated over a grid of runs, the
    /// planner's cycles equal the `.ipub_cost` of the assembled variant
    /// evaluated the way the package does it (defines, then parameters).
    #[test]
    fn planner_formulas_are_the_shipped_kernels_formulas() {
        let grid = [1i64, 2, 3, 5, 6, 7, 13, 64, 197, 768];
        for kernel in shipped() {
            let entry = assembled(kernel);
            let shipped = entry.cost.expect("every shipped kernel has a cost").formula;
            assert_eq!(formula(kernel), Some(shipped.as_str()), "{kernel}");
            let mut values: BTreeMap<String, i64> = defines(kernel)
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect();
            for &a in &grid {
                for &b in &grid {
                    let params = [
                        ("rows", a),
                        ("row_length", b),
                        ("first_row", a * 3),
                        ("matrix_rows", b),
                        ("count", a.min(12)),
                        ("length", b * 4),
                        ("outer", a),
                        ("inner", b),
                        ("words", 4),
                        ("segment", a.min(3)),
                        ("segments", a.min(12)),
                        ("batch", a.min(4)),
                        ("parts", a.clamp(1, 6)),
                        ("piece", b / a.clamp(1, 6)),
                    ];
                    values.extend(params.iter().map(|&(n, v)| (n.to_string(), v)));
                    let expected = kernels::eval_cost(&shipped, &values)
                        .unwrap_or_else(|e| panic!("{kernel} with {params:?}: {e}"));
                    assert_eq!(
                        cycles(kernel, &params),
                        u64::try_from(expected).ok(),
                        "{kernel} with {params:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn kernels_without_a_formula_here_cost_none() {
        let f16_gelu_of_f32 = KernelId::Gelu {
            dtype: DType::F32,
            add: false,
        };
        assert_eq!(cycles(f16_gelu_of_f32, &[("rows", 1)]), None);
    }
}
