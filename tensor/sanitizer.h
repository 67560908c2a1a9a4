// NG_ASAN: defined to 1 in an AddressSanitizer build, by either compiler. GCC defines
// __SANITIZE_ADDRESS__; clang has the feature test instead (and CI's asan build is clang's, scripts/asan.sh).
// Code that must behave differently under ASan (gemm.cpp's uninstrumented micro-kernel, huge_blocks.cpp's
// mappings, the tests that skip a huge allocation) tests this one macro, so that no compiler is missed.
// NG_TSAN: the same for ThreadSanitizer (GCC's __SANITIZE_THREAD__, clang's thread_sanitizer feature). Only
// tests use it, to spend less time on work that checks values rather than races (tests/test_gemm.cpp).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NG_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define NG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NG_TSAN 1
#endif
#endif
