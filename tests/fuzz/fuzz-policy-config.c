/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the configuration parser: any input must parse or fail with errors,
 * never crash or leak, and no configuration may make the panic image fast.
 *
 * Built with -fsanitize=fuzzer in a fuzzing build (libFuzzer's main). In other
 * builds POLICY_FUZZ_STANDALONE adds a main() that replays the files and
 * directories given as arguments, so the committed corpus runs everywhere.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"
#include "policy.h"
#include "string-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const Policy *p) {
	static const PolicyMetadata md[] = { { "role", "db" }, { "tier", "gold" } };
	VmFacts vf = {
		.name = "web-1",
		.memory_bytes = UINT64_C(8) << 30,
		.persistent = true,
		.metadata = md,
		.n_metadata = ELEMENTSOF(md),
	};
	HandoffFacts hf = {
		.digests_at_stage = true,
		.files_unchanged = true,
		.memory_map_unchanged = true,
		.have_mce = true,
		.have_edac = true,
		.iommu_enabled = true,
		.have_taint = true,
	};
	HandoffDecision hd = {};
	VmDecision vd = {};
	PolicyVerdict v = {};
	CommitFacts cf = { .staged = true, .kernel_loaded = true, .staged_unchanged = true };
	json_object *j = NULL;

	if (policy_decide_handoff(p, &hf, &hd) < 0)
		abort();
	policy_handoff_decision_done(&hd);
	/* The safety invariant: whatever the configuration says, a blocking fact (here DMA
	 * that the IOMMU does not translate) always means a verified handoff. */
	hf.iommu_enabled = false;
	if (policy_decide_handoff(p, &hf, &hd) < 0 || hd.handoff != HANDOFF_MODE_VERIFIED)
		abort();
	policy_handoff_decision_done(&hd);

	if (policy_decide_vm(p, &vf, &vd) < 0)
		abort();
	cf.vms = &vd;
	cf.n_vms = 1;
	if (policy_check_commit(p, &cf, &v) < 0)
		abort();
	if (policy_verdict_to_json(&v, &j) < 0)
		abort();
	json_object_put(j);
	policy_verdict_done(&v);
	policy_vm_decision_done(&vd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	Policy *p = NULL;
	PolicyErrors e = {};
	bool failed = false;
	FILE *null;
	int r;

	if (size > 64 * 1024)
		return 0;
	if (policy_new_default(&p) < 0)
		abort();
	/* twice, as main file and drop-in: list appends and rule merging */
	for (int i = 0; i < 3; i++) {
		r = i < 2 ? policy_parse_buffer(p, i == 0 ? "upgraded.conf" : "10-dropin.conf",
		                                (const char *)data, size, &e)
		          : policy_finish(p, &e);
		if (r < 0 && r != -EBADMSG)
			abort();
		failed = failed || r < 0;
	}
	if (failed != (e.n > 0))
		abort(); /* failure exactly when something was reported */
	null = fopen("/dev/null", "we");
	if (null) {
		policy_errors_print(&e, null);
		fclose(null);
	}
	if (e.n == 0)
		exercise(p);
	policy_errors_done(&e);
	policy_free(p);
	return 0;
}

#ifdef POLICY_FUZZ_STANDALONE
static int replay_file(const char *path) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_file_full(path, 64 * 1024, &data, &size);
	if (r < 0) {
		fprintf(stderr, "Cannot read '%s': %s\n", path, strerror(-r));
		return r;
	}
	return LLVMFuzzerTestOneInput((const uint8_t *)data, size);
}

static int name_cmp(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, size_t *n) {
	_cleanup_strv_free_ char **names = NULL;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d) {
		fprintf(stderr, "Cannot open '%s': %m\n", dir);
		return -errno;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && strv_extend(&names, de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
	closedir(d);
	if (names)
		qsort(names, strv_length(names), sizeof(char *), name_cmp);
	STRV_FOREACH (name, names) {
		_cleanup_free_ char *path = NULL;

		if (asprintf(&path, "%s/%s", dir, *name) < 0)
			return -ENOMEM;
		if (replay_file(path) < 0)
			return -EIO;
		(*n)++;
	}
	return 0;
}

int main(int argc, char *argv[]) {
	size_t n = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "Cannot access '%s': %m\n", argv[i]);
			return EXIT_FAILURE;
		}
		if (S_ISDIR(st.st_mode) ? replay_dir(argv[i], &n) < 0 : replay_file(argv[i]) < 0)
			return EXIT_FAILURE;
		if (!S_ISDIR(st.st_mode))
			n++;
	}
	if (n == 0) {
		fprintf(stderr, "No input replayed\n");
		return EXIT_FAILURE;
	}
	printf("replayed %zu inputs\n", n);
	return EXIT_SUCCESS;
}
#endif
