// The GEMM kernels' weight loads (`gemm_f16_amp.S`, `gemm_f16_f32out.S`).

// The unit's next 512-byte CWEI block from $m7: 32 128-bit loads where the
// operands are in interleaved memory (INTERLEAVED), 64 64-bit ones
// otherwise.
.macro load_weights
#if INTERLEAVED
        rpt     32, 1
        ld128cwei $m7+=
#else
        rpt     64, 1
        ldcwei  $m7+=
#endif
.endm
