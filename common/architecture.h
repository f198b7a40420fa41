/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The architecture upgraded was built for, which is the host's: Debian's names
 * ("x86_64" as the kernel says, "arm64"). Describe(), the report (host.architecture),
 * the metrics and the policy's hardware-error facts name it.
 */
#if defined(__x86_64__)
#define UPGRADED_ARCHITECTURE "x86_64"
#elif defined(__aarch64__)
#define UPGRADED_ARCHITECTURE "arm64"
#else
#error "upgraded builds for x86_64 and arm64 only"
#endif
