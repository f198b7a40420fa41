/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The VM steps wired into the state machine (daemon/vm/vm-steps*.c), without a bus: the
 * context with the real hooks against libvirt's test driver (test:///default,
 * one in-process host shared by every connection while one stays open). A
 * "crash" stops the running operation right after a record hit the disk; a new
 * context then loads and recovers, as a restarted daemon would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "context-private.h" /* the tests look inside the state machine */
#include "daemon-test-util.h"
#include "measure.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-bus.h"
#include "vm.h"
#include "vm-steps.h"

#define OLD_KERNEL "6.1.0-47-cloud-amd64"
#define NEW_KERNEL "6.1.0-57-cloud-amd64"
#define KERNEL     "/boot/vmlinuz-" NEW_KERNEL
#define BOOT_A     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define BOOT_B     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define URI        "test:///default"

typedef struct World {
	char *root;
	virConnectPtr conn; /* keeps the test host alive across "restarts" */
	VmWiring *vms;
	bool with_measure;            /* the daemon's measurement (probe disabled: marks only) */
	Measure *measure;             /* of the running "boot"; outlives its context */
	const char *crash_after_hook; /* crash at the persist that marks this hook done */
	bool crash_at_vm_mark;        /* crash at the persist of the empty "vms" mark */
	bool crashed;
	unsigned requests;
	unsigned changes; /* update_changed notifications */
} World;

/* ---- failure injection: a managed save of one domain fails ---- */

static const char *fail_save_of, *fail_create_of;

static int fake_managed_save(virDomainPtr d, unsigned flags) {
	if (fail_save_of && streq(virDomainGetName(d), fail_save_of))
		return -1;
	return virDomainManagedSave(d, flags);
}

static int fake_create(virDomainPtr d, unsigned flags) {
	if (fail_create_of && streq(virDomainGetName(d), fail_create_of))
		return -1;
	return virDomainCreateWithFlags(d, flags);
}

static VmOps ops;

/* ---- context seams ---- */

static int request_kexec(Context *c, Update *u, void *userdata) {
	((World *)userdata)->requests++;
	context_handoff_result(c, u, 0, NULL);
	return 0;
}

static void on_changed(Context *c, Update *u, void *userdata) {
	((World *)userdata)->changes++;
}

static int crash_seam(Context *c, Update *u, unsigned step, void *userdata) {
	World *w = userdata;

	if (!w->crashed && w->crash_at_vm_mark && u->vms && json_object_array_length(u->vms) == 0) {
		w->crashed = true;
		return -ECANCELED;
	}
	if (!w->crashed && w->crash_after_hook && update_hook_done(u, w->crash_after_hook)) {
		w->crashed = true;
		return -ECANCELED;
	}
	return 0;
}

static Context *boot(World *w, const char *running, const char *boot_id, bool recover) {
	Context *c = NULL;
	Policy *p = NULL;
	int r;

	assert_int_equal(context_new(w->root, &kexec_backend_record, &c), 0);
	c->image_owner = getuid();
	free(c->running_kernel);
	c->running_kernel = strdup(running);
	memcpy(c->boot_id, boot_id, 33);
	assert_int_equal(policy_load(w->root, &p, NULL), 0);
	assert_int_equal(context_set_policy(c, p), 0);
	if (w->with_measure) {
		w->measure = measure_free(w->measure);
		assert_int_equal(
		        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true },
		                    &w->measure),
		        0);
		assert_int_equal(measure_attach(w->measure, c), 0);
	}
	vms_free(w->vms);
	assert_int_equal(vms_attach(c, URI, &w->vms), 0);
	vms_set_measure(w->vms, w->with_measure ? w->measure : NULL);
	c->ops.request_kexec = request_kexec;
	c->ops.update_changed = on_changed;
	c->ops_userdata = w;
	c->persist_hook = crash_seam;
	c->persist_hook_userdata = w;
	assert_int_equal(context_load(c), 0);
	if (w->measure)
		(void)measure_daemon_start(w->measure, c);
	if (recover) {
		r = context_recover(c);
		assert_true(r >= 0 || r == -ECANCELED);
	}
	return c;
}

static void silence(void *userdata, virErrorPtr e) {
}

static void define_domain(virConnectPtr conn, const char *name) {
	char xml[512];
	virDomainPtr d;

	snprintf(xml, sizeof(xml),
	         "<domain type='test'><name>%s</name><memory>65536</memory><vcpu>1</vcpu>"
	         "<os><type>hvm</type></os></domain>",
	         name);
	d = virDomainDefineXML(conn, xml);
	assert_non_null(d);
	assert_int_equal(virDomainCreate(d), 0);
	virDomainFree(d);
}

/* libvirtd still starting on the new kernel: the next connect_failures opens fail. */
static unsigned connect_failures;

static virConnectPtr failing_connect_open(const char *uri) {
	if (__atomic_load_n(&connect_failures, __ATOMIC_SEQ_CST) > 0) {
		__atomic_sub_fetch(&connect_failures, 1, __ATOMIC_SEQ_CST);
		return NULL;
	}
	return virConnectOpen(uri);
}

static int setup(void **state) {
	World *w = calloc(1, sizeof(*w));
	virDomainPtr t;

	if (!w || !(w->root = test_mkroot()))
		return -1;
	if (test_write_bzimage(w->root, KERNEL, NEW_KERNEL, BZ_OK, 0644) < 0)
		return -1;
	virSetErrorFunc(NULL, silence);
	w->conn = virConnectOpen(URI);
	assert_non_null(w->conn);
	/* The built-in "test" domain (8 GiB) is shut off: it must be listed, not touched. */
	t = virDomainLookupByName(w->conn, "test");
	assert_non_null(t);
	assert_int_equal(virDomainDestroy(t), 0);
	virDomainFree(t);
	define_domain(w->conn, "a");
	define_domain(w->conn, "b");
	ops = *vm_ops_default();
	ops.managed_save = fake_managed_save;
	ops.create = fake_create;
	ops.connect_open = failing_connect_open;
	vm_set_ops(&ops);
	fail_save_of = fail_create_of = NULL;
	connect_failures = 0;
	*state = w;
	return 0;
}

static int teardown(void **state) {
	World *w = *state;

	assert_int_equal(vm_wait_detached(10 * 1000000ULL), 0);
	vm_set_ops(NULL);
	w->vms = vms_free(w->vms);
	w->measure = measure_free(w->measure);
	virConnectClose(w->conn); /* resets the test host */
	test_rmroot(w->root);
	free(w);
	return 0;
}

static Update *stage(Context *c) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	StageRequest req = { .kernel = KERNEL, .cmdline = "root=/dev/vda1 ro" };
	Update *u = NULL;

	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	return u;
}

static int dom_state(World *w, const char *name, bool *ret_has_image) {
	virDomainPtr d = virDomainLookupByName(w->conn, name);
	int state = -1, reason;

	assert_non_null(d);
	assert_int_equal(virDomainGetState(d, &state, &reason, 0), 0);
	if (ret_has_image)
		*ret_has_image = virDomainHasManagedSaveImage(d, 0) > 0;
	virDomainFree(d);
	return state;
}

/* The guarantee of every failed commit: a and b running, no image left, test off. */
static void assert_all_given_back(World *w) {
	bool img;

	assert_int_equal(dom_state(w, "a", &img), VIR_DOMAIN_RUNNING);
	assert_false(img);
	assert_int_equal(dom_state(w, "b", &img), VIR_DOMAIN_RUNNING);
	assert_false(img);
	assert_int_equal(dom_state(w, "test", NULL), VIR_DOMAIN_SHUTOFF);
}

static const char *vm_field(const Update *u, const char *name, const char *key) {
	for (size_t i = 0; u->vms && i < json_object_array_length(u->vms); i++) {
		json_object *e = json_object_array_get_idx(u->vms, i), *v;

		if (json_object_object_get_ex(e, "name", &v) &&
		    streq(json_object_get_string(v), name))
			return json_object_object_get_ex(e, key, &v) ? json_object_get_string(v)
			                                             : NULL;
	}
	return NULL;
}

static void assert_report_valid(World *w, const char *id) {
	_cleanup_free_ char *rel = NULL, *path = NULL, *cmd = NULL;

	assert_true(asprintf(&rel, "/var/lib/upgraded/reports/%s.json", id) > 0);
	assert_int_equal(path_prefix_root(w->root, rel, &path), 0);
	assert_true(asprintf(&cmd, "python3 '%s' '%s' '%s'", VALIDATE_REPORT, REPORT_SCHEMA, path) >
	            0);
	assert_int_equal(system(cmd), 0);
}

static void write_config(World *w, const char *text) {
	_cleanup_free_ char *dir = NULL;

	assert_true(asprintf(&dir, "%s/etc/upgraded", w->root) > 0);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(test_write_file(w->root, "/etc/upgraded/upgraded.conf", text, 0644), 0);
}

/* ---- tests ---- */

static void test_vms_commit_checkpoints_and_restores(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	_cleanup_free_ char *id = NULL;
	Update *u = stage(c);
	bool img;

	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_non_null(u->decisions);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_string_equal(u->phase, PHASE_HANDOFF_REQUESTED);
	assert_int_equal(w->requests, 1);
	/* Both running VMs saved (the blackout), the shut off one left alone. */
	assert_string_equal(vm_field(u, "a", "result"), "saved");
	assert_string_equal(vm_field(u, "b", "result"), "saved");
	assert_string_equal(vm_field(u, "test", "result"), "ignored");
	assert_int_equal(dom_state(w, "a", &img), VIR_DOMAIN_SHUTOFF);
	assert_true(img);
	assert_true(w->changes > 3); /* per-VM progress reached the bus seam */
	context_free(c);

	/* The new kernel: the daemon restores from the record alone. */
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_string_equal(vm_field(u, "a", "result"), "resumed");
	assert_string_equal(vm_field(u, "b", "result"), "resumed");
	assert_all_given_back(w);
	assert_report_valid(w, id);
	context_free(c);
}

/* libvirtd not answering yet: on the new kernel the restore waits until libvirt answers,
 * then restores, and stamps the moment (the report's libvirt-wait phase). */
static void test_vms_restore_waits_for_libvirt(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	_cleanup_free_ char *id = NULL;
	const UpdateStamp *st, *done;
	Update *u = stage(c);

	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	context_free(c);

	connect_failures = 3; /* 3 refusals, 0.2 s apart */
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(connect_failures, 0);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_string_equal(vm_field(u, "a", "result"), "resumed");
	assert_string_equal(vm_field(u, "b", "result"), "resumed");
	st = update_find_stamp(u, "libvirt-answered");
	done = update_find_stamp(u, "completed");
	assert_non_null(st);
	assert_non_null(done);
	assert_string_equal(st->boot_id, BOOT_B);
	assert_true(st->monotonic_usec <= done->monotonic_usec);
	assert_all_given_back(w);
	assert_report_valid(w, id);
	context_free(c);
}

static void test_vms_save_failure_rolls_back(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c);

	fail_save_of = "b";
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	(void)context_commit_run(c, u);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_int_equal(w->requests, 0);
	assert_non_null(strstr(u->error, "VM 'b'"));
	assert_string_equal(vm_field(u, "a", "result"), "rolled-back");
	assert_string_equal(vm_field(u, "b", "result"), "rolled-back");
	assert_all_given_back(w);
	assert_report_valid(w, u->id);
	context_free(c);
}

static void test_vms_crash_after_checkpoint_rolls_back_on_restart(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	_cleanup_free_ char *id = NULL;
	Update *u = stage(c);
	bool img;

	id = strdup(u->id);
	w->crash_after_hook = "pre:vm-checkpoint";
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), -ECANCELED);
	assert_true(w->crashed);
	assert_int_equal(w->requests, 0);
	/* The daemon died with both VMs saved and shut off. */
	assert_int_equal(dom_state(w, "a", &img), VIR_DOMAIN_SHUTOFF);
	assert_true(img);
	context_free(c);

	/* Same boot, restarted: the commit was interrupted, everything comes back. */
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "interrupted"));
	assert_all_given_back(w);
	assert_report_valid(w, id);
	context_free(c);
}

/* The daemon died inside the checkpoint: only the decisions are on disk, "a" was
 * saved and "b" paused. The restart gives both back from their current state. */
static void test_vms_crash_inside_checkpoint_rolls_back_from_decisions(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	_cleanup_free_ char *id = NULL;
	Update *u = stage(c);
	virDomainPtr d;

	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	w->crash_at_vm_mark = true;
	assert_int_equal(context_commit_run(c, u), -ECANCELED);
	assert_true(w->crashed);
	context_free(c);
	/* What the checkpoint had done when the daemon died. */
	d = virDomainLookupByName(w->conn, "a");
	assert_int_equal(virDomainSuspend(d), 0);
	assert_int_equal(virDomainManagedSave(d, 0), 0);
	virDomainFree(d);
	d = virDomainLookupByName(w->conn, "b");
	assert_int_equal(virDomainSuspend(d), 0);
	virDomainFree(d);

	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_string_equal(vm_field(u, "a", "result"), "rolled-back");
	assert_string_equal(vm_field(u, "b", "result"), "rolled-back");
	assert_all_given_back(w);
	assert_report_valid(w, id);
	context_free(c);
}

/* A commit that fails before the checkpoint (the image was unloaded meanwhile)
 * touches no VM and records none as rolled back. */
static void test_vms_failure_before_checkpoint_touches_nothing(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c);

	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(c->backend->unload(c->root, 0), 0);
	(void)context_commit_run(c, u);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "kexec-image-loaded"));
	assert_null(u->vms);
	assert_all_given_back(w);
	assert_report_valid(w, u->id);
	context_free(c);
}

/* On the new kernel "b" cannot be restored: its image is kept, the update fails
 * naming it, the other VM runs; restore-vm later brings "b" back and records it. */
static void test_vms_restore_failure_keeps_image(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	_cleanup_free_ char *id = NULL;
	Update *u = stage(c);
	bool img;

	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	context_free(c);

	fail_create_of = "b";
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "VM 'b'"));
	assert_non_null(strstr(u->error, "restore-vm"));
	assert_string_equal(vm_field(u, "a", "result"), "resumed");
	assert_string_equal(vm_field(u, "b", "result"), "failed");
	assert_int_equal(dom_state(w, "a", NULL), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state(w, "b", &img), VIR_DOMAIN_SHUTOFF);
	assert_true(img);
	assert_report_valid(w, id);

	fail_create_of = NULL;
	assert_int_equal(vms_restore_one(w->vms, "b", &e), 0);
	assert_all_given_back(w);
	assert_string_equal(vm_field(u, "b", "result"), "resumed");
	context_free(c);
}

static void test_vms_policy_refusal_changes_nothing(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	_cleanup_free_ char *before = NULL, *after = NULL, *plan = NULL, *rel = NULL, *path = NULL;
	json_object *o, *v;
	Context *c;
	Update *u;

	write_config(w, "[Commit]\nMaxVMs=1\n");
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = stage(c);
	assert_true(asprintf(&rel, "/var/lib/upgraded/updates/%s.json", u->id) > 0);
	assert_int_equal(path_prefix_root(w->root, rel, &path), 0);
	assert_int_equal(read_file_full(path, 1 << 20, &before, NULL), 0);

	/* The dry run says why, and changes nothing either. */
	assert_int_equal(context_plan_commit(c, "", &plan, &e), 0);
	o = json_tokener_parse(plan);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "allowed", &v));
	assert_false(json_object_get_boolean(v));
	assert_non_null(strstr(plan, "too-many-vms"));
	assert_non_null(strstr(plan, "\"strategy\":\"checkpoint\""));
	json_object_put(o);

	assert_true(context_commit_begin(c, "", &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_POLICY_REFUSED));
	assert_non_null(strstr(e.message, "MaxVMs=1"));
	u = c->active;
	assert_non_null(u);
	assert_int_equal(u->state, UPDATE_STAGED);
	assert_null(u->decisions);
	assert_int_equal(read_file_full(path, 1 << 20, &after, NULL), 0);
	assert_string_equal(before, after);
	assert_all_given_back(w);
	context_free(c);
}

/* Rules see the domain's metadata; pause (memory not kept across kexec) is refused. */
static void test_vms_metadata_rule_and_pause_refused(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *plan = NULL;
	World *w = *state;
	json_object *o, *vms, *v;
	virDomainPtr d;
	Update *u = NULL;
	Context *c;
	int found = 0;

	d = virDomainDefineXML(
	        w->conn, "<domain type='test'><name>m</name><memory>65536</memory><vcpu>1</vcpu>"
	                 "<metadata><up:policy xmlns:up='urn:upgraded:policy:1'>"
	                 "<up:role>gpu</up:role></up:policy></metadata>"
	                 "<os><type>hvm</type></os></domain>");
	assert_non_null(d);
	assert_int_equal(virDomainCreate(d), 0);
	virDomainFree(d);
	write_config(w, "[VMRule:gpu]\nMetadata=role=gpu\nStrategy=shutdown\n"
	                "[VMRule:keep]\nName=b\nStrategy=keep-ram\n");
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	(void)stage(c);

	assert_int_equal(context_plan_commit(c, "", &plan, &e), 0);
	o = json_tokener_parse(plan);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "decisions", &v));
	assert_true(json_object_object_get_ex(v, "vms", &vms));
	for (size_t i = 0; i < json_object_array_length(vms); i++) {
		json_object *x = json_object_array_get_idx(vms, i), *name, *strategy, *rule, *ref;

		assert_true(json_object_object_get_ex(x, "name", &name));
		assert_true(json_object_object_get_ex(x, "strategy", &strategy));
		json_object_object_get_ex(x, "rule", &rule);
		json_object_object_get_ex(x, "refused", &ref);
		if (streq(json_object_get_string(name), "m")) {
			assert_string_equal(json_object_get_string(strategy), "shutdown");
			assert_string_equal(json_object_get_string(rule), "gpu");
			found++;
		} else if (streq(json_object_get_string(name), "b")) {
			assert_string_equal(json_object_get_string(strategy), "keep-ram");
			assert_true(json_object_get_boolean(ref));
			found++;
		}
	}
	assert_int_equal(found, 2);
	assert_true(json_object_object_get_ex(o, "allowed", &v));
	assert_false(json_object_get_boolean(v));
	json_object_put(o);

	assert_true(context_commit_begin(c, "", &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_POLICY_REFUSED));
	assert_non_null(strstr(e.message, "VM 'b'"));
	assert_int_equal(dom_state(w, "m", NULL), VIR_DOMAIN_RUNNING);
	assert_all_given_back(w);
	context_free(c);
}

static void test_vms_restore_one_errors(void **state) {
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	virDomainPtr d;

	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		assert_true(vms_restore_one(w->vms, "nope", &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_VM));
	}
	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		assert_true(vms_restore_one(w->vms, "a", &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_VM_RUNNING));
	}
	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		assert_true(vms_restore_one(w->vms, "test", &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SAVED_STATE));
	}
	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		assert_true(vms_restore_one(w->vms, "bad\nname", &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_VM_NAME));
	}
	/* A kept image is restored on request. */
	d = virDomainLookupByName(w->conn, "b");
	assert_int_equal(virDomainManagedSave(d, 0), 0);
	virDomainFree(d);
	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		assert_int_equal(vms_restore_one(w->vms, "b", &e), 0);
	}
	assert_all_given_back(w);
	context_free(c);
}

static json_object *load_json(World *w, const char *rel) {
	_cleanup_free_ char *path = NULL, *text = NULL;
	json_object *o;

	assert_int_equal(path_prefix_root(w->root, rel, &path), 0);
	assert_int_equal(read_file_full(path, 1 << 24, &text, NULL), 0);
	o = json_tokener_parse(text);
	assert_non_null(o);
	return o;
}

static json_object *jpath(json_object *o, const char *a, const char *b, const char *c) {
	const char *keys[] = { a, b, c };

	for (size_t i = 0; i < ELEMENTSOF(keys) && keys[i]; i++)
		if (!o || !json_object_object_get_ex(o, keys[i], &o))
			return NULL;
	return o;
}

static json_object *probe_vm(json_object *report, const char *kernel, const char *name) {
	json_object *vms = jpath(report, "probe", kernel, "vms"), *n;

	for (size_t i = 0; vms && i < json_object_array_length(vms); i++) {
		json_object *v = json_object_array_get_idx(vms, i);
		if (json_object_object_get_ex(v, "name", &n) &&
		    streq(json_object_get_string(n), name))
			return v;
	}
	return NULL;
}

static int64_t mark(json_object *vm, const char *name) {
	json_object *v = jpath(vm, "marks_ns", name, NULL);
	return v ? json_object_get_int64(v) : 0;
}

/* The VM steps name their moments to the measurement on both kernels: on the old one
 * the window opens right before each pause and the pause is stamped when it returned;
 * on the new one each VM's restore, then (window) its resume, from the restore worker
 * itself, after the daemon's start. */
static void test_vms_measure_moments(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL, *rel = NULL;
	World *w = *state;
	Context *c;
	Update *u;
	json_object *report;

	w->with_measure = true;
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = stage(c);
	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_int_equal(w->requests, 1);
	context_free(c);
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_all_given_back(w);
	assert_report_valid(w, id);
	assert_true(asprintf(&rel, "/var/lib/upgraded/reports/%s.json", id) > 0);
	report = load_json(w, rel);

	for (size_t i = 0; i < 2; i++) {
		const char *name = i == 0 ? "a" : "b";
		json_object *old = probe_vm(report, "old", name),
		            *new = probe_vm(report, "new", name);
		json_object *start = jpath(jpath(report, "probe", "new", "marks_ns"),
		                           "daemon-start", NULL, NULL);
		int64_t window_old, window_new;

		assert_non_null(old);
		assert_non_null(new);
		window_old = json_object_get_int64(jpath(old, "window_ns", NULL, NULL));
		window_new = json_object_get_int64(jpath(new, "window_ns", NULL, NULL));
		assert_true(window_old > 0 && mark(old, "pause") >= window_old);
		assert_true(mark(old, "save-complete") >= mark(old, "pause"));
		assert_non_null(start);
		assert_true(mark(new, "restore") >= json_object_get_int64(start));
		assert_true(window_new >= mark(new, "restore"));
		assert_true(mark(new, "resume") >= window_new);
	}
	/* The other VM was not touched: it has no moments. */
	assert_null(probe_vm(report, "new", "test"));
	json_object_put(report);
	context_free(c);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_vms_commit_checkpoints_and_restores),
		T(test_vms_restore_waits_for_libvirt),
		T(test_vms_save_failure_rolls_back),
		T(test_vms_crash_after_checkpoint_rolls_back_on_restart),
		T(test_vms_crash_inside_checkpoint_rolls_back_from_decisions),
		T(test_vms_failure_before_checkpoint_touches_nothing),
		T(test_vms_restore_failure_keeps_image),
		T(test_vms_policy_refusal_changes_nothing),
		T(test_vms_metadata_rule_and_pause_refused),
		T(test_vms_restore_one_errors),
		T(test_vms_measure_moments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
