/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The kept RAM's digest, hashed in parallel: the file is cut into fixed 64 MiB chunks (fixed,
 * so that the digest does not depend on how many CPUs either kernel has), threads take chunks
 * in turn and hash them with the project's SHA-256 (purgatory/sha256.c), and the digest is the
 * SHA-256 of the file size and the chunk digests in order. The sampled mode hashes the first
 * 4 KiB of every 256 KiB (1/64 of the bytes): a cheap check that the file is not zeroed or
 * someone else's, not a proof of every byte.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keep-ram-digest.h"
#include "macros.h"
#include "sha256.h"

#define CHUNK_SIZE    (64ULL << 20)
#define SAMPLE_STRIDE (256ULL << 10)
#define SAMPLE_SIZE   (4ULL << 10)
#define READ_SIZE     (1ULL << 20)
#define MAX_THREADS   64u

typedef struct DigestJob {
	pthread_mutex_t lock;
	int fd;
	uint64_t size, n_chunks, next;
	bool sampled;
	uint8_t (*digests)[SHA256_DIGEST_SIZE];
	int error;
} DigestJob;

/* Hashes chunk c into job->digests[c]. */
static int hash_chunk(DigestJob *job, uint64_t c, uint8_t *buf) {
	uint64_t start = c * CHUNK_SIZE, end = MIN(start + CHUNK_SIZE, job->size);
	uint64_t step = job->sampled ? SAMPLE_STRIDE : READ_SIZE;
	uint64_t want = job->sampled ? SAMPLE_SIZE : READ_SIZE;
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	for (uint64_t off = start; off < end; off += step) {
		size_t len = (size_t)MIN(want, end - off);
		ssize_t n = pread(job->fd, buf, len, (off_t)off);

		if (n < 0)
			return -errno;
		if ((size_t)n != len)
			return -EIO; /* the file shrank under us */
		sha256_update(&ctx, buf, len);
	}
	sha256_final(&ctx, job->digests[c]);
	return 0;
}

static void *digest_thread(void *p) {
	DigestJob *job = p;
	uint8_t *buf = malloc(READ_SIZE);

	for (;;) {
		uint64_t c;
		int k;

		pthread_mutex_lock(&job->lock);
		c = job->next++;
		if (!buf && !job->error)
			job->error = -ENOMEM;
		if (job->error || c >= job->n_chunks) {
			pthread_mutex_unlock(&job->lock);
			break;
		}
		pthread_mutex_unlock(&job->lock);
		k = hash_chunk(job, c, buf);
		if (k < 0) {
			pthread_mutex_lock(&job->lock);
			job->error = job->error ?: k;
			pthread_mutex_unlock(&job->lock);
		}
	}
	free(buf);
	return NULL;
}

static void to_hex(const uint8_t *d, size_t n, char *out) {
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = 0;
}

int keep_ram_digest_fd(int fd, KeepRamDigestMode mode, unsigned threads, char **ret_hex) {
	DigestJob job = { .lock = PTHREAD_MUTEX_INITIALIZER,
		          .sampled = mode == KEEP_RAM_DIGEST_SAMPLED };
	pthread_t tids[MAX_THREADS];
	uint8_t final[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	unsigned n_threads = 0;
	struct stat st;
	char *hex;

	if (mode != KEEP_RAM_DIGEST_SAMPLED && mode != KEEP_RAM_DIGEST_FULL)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	job.fd = fd;
	job.size = (uint64_t)st.st_size;
	job.n_chunks = (job.size + CHUNK_SIZE - 1) / CHUNK_SIZE;
	job.digests = calloc(job.n_chunks ?: 1, SHA256_DIGEST_SIZE);
	if (!job.digests)
		return -ENOMEM;
	if (!threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (unsigned)n : 1;
	}
	threads = (unsigned)MIN((uint64_t)MIN(threads, MAX_THREADS), job.n_chunks ?: 1);
	for (; n_threads < threads; n_threads++)
		if (pthread_create(&tids[n_threads], NULL, digest_thread, &job) != 0)
			break;
	if (n_threads == 0)
		digest_thread(&job); /* no thread to spare: hash on this one */
	for (unsigned i = 0; i < n_threads; i++)
		pthread_join(tids[i], NULL);

	if (job.error) {
		free(job.digests);
		return job.error;
	}
	sha256_init(&ctx);
	sha256_update(&ctx, &job.size, sizeof(job.size));
	sha256_update(&ctx, job.digests, (size_t)job.n_chunks * SHA256_DIGEST_SIZE);
	sha256_final(&ctx, final);
	free(job.digests);

	hex = malloc(SHA256_DIGEST_SIZE * 2 + 1);
	if (!hex)
		return -ENOMEM;
	to_hex(final, SHA256_DIGEST_SIZE, hex);
	*ret_hex = hex;
	return 0;
}

int keep_ram_digest_file(const char *path, KeepRamDigestMode mode, unsigned threads,
                         char **ret_hex) {
	_cleanup_close_ int fd =
	        open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return keep_ram_digest_fd(fd, mode, threads, ret_hex);
}
