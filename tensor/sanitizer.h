// NG_ASAN: defined to 1 in an AddressSanitizer build, by either compiler. GCC defines
// __SANITIZE_ADDRESS__; clang has the feature test instead (and CI's asan build is clang's, scripts/asan.sh).
// Code that must behave differently under ASan (gemm.cpp's uninstrumented micro-kernel, huge_blocks.cpp's
// mappings, the tests that skip a huge allocation) tests this one macro, so that no compiler is missed.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NG_ASAN 1
#endif
#endif
