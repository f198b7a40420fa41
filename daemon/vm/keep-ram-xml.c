/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram's facts from a domain XML, through libxml2 (see keep-ram-xml.h). Only the root
 * <domain> element's own children are looked at, by name and namespace: an element of the same
 * name inside <metadata>, or a string inside <description>, is never one of them.
 */

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "keep-ram-xml.h"
#include "macros.h"
#include "string-util.h"

void keep_ram_xml_done(KeepRamXml *x) {
	if (!x)
		return;
	free(x->name);
	strv_free(x->qemu_args);
	*x = (KeepRamXml){ .id = -1 };
}

bool keep_ram_uuid_ok(const char *s) {
	if (!s || strlen(s) != KEEP_RAM_UUID_LEN)
		return false;
	for (size_t i = 0; i < KEEP_RAM_UUID_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	}
	return true;
}

static void xml_freep(xmlChar **p) {
	if (*p)
		xmlFree(*p);
}
#define _cleanup_xml_free_ _cleanup_(xml_freep)

/* An element of libvirt's own (no) namespace called name. */
static bool is_plain(const xmlNode *n, const char *name) {
	return n->type == XML_ELEMENT_NODE && !n->ns && streq((const char *)n->name, name);
}

static bool is_qemu(const xmlNode *n, const char *name) {
	return n->type == XML_ELEMENT_NODE && n->ns && n->ns->href &&
	       streq((const char *)n->ns->href, KEEP_RAM_QEMU_NS) &&
	       streq((const char *)n->name, name);
}

/* The value of attribute name (no namespace) of n, or NULL; the caller frees with xmlFree. */
static char *attr(const xmlNode *n, const char *name) {
	return (char *)xmlGetNoNsProp(n, (const xmlChar *)name);
}

static bool attr_is(const xmlNode *n, const char *name, const char *value) {
	char *v = attr(n, name);
	bool r = v && streq(v, value);

	xmlFree(v);
	return r;
}

/* "+N" or a name, as libvirt writes either half of a DAC label. */
static int dac_id(const char *s, size_t len, bool group, unsigned *ret) {
	_cleanup_free_ char *w = strndup(s, len);
	unsigned long long v;

	if (!w)
		return -ENOMEM;
	if (len == 0)
		return -EINVAL;
	if (w[0] == '+') {
		if (safe_atou64(w + 1, &v) < 0 || v >= UINT32_MAX)
			return -EINVAL;
		*ret = (unsigned)v;
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(w);

		if (!g)
			return -EINVAL;
		*ret = g->gr_gid;
	} else {
		struct passwd *pw = getpwnam(w);

		if (!pw)
			return -EINVAL;
		*ret = pw->pw_uid;
	}
	return 0;
}

static int parse_seclabel(const xmlNode *sec, KeepRamXml *x) {
	unsigned uid, gid;

	if (!attr_is(sec, "model", "dac"))
		return 0;
	for (const xmlNode *c = sec->children; c; c = c->next) {
		_cleanup_xml_free_ xmlChar *label = NULL;
		const char *colon;

		if (!is_plain(c, "label"))
			continue;
		label = xmlNodeGetContent(c);
		colon = label ? strchr((char *)label, ':') : NULL;
		if (!colon ||
		    dac_id((char *)label, (size_t)(colon - (char *)label), false, &uid) < 0 ||
		    dac_id(colon + 1, strlen(colon + 1), true, &gid) < 0)
			return -EINVAL;
		x->has_dac_owner = true;
		x->dac_uid = (uid_t)uid;
		x->dac_gid = (gid_t)gid;
	}
	return 0;
}

static void parse_memory_backing(const xmlNode *mb, KeepRamXml *x) {
	bool file = false, shared = false;

	for (const xmlNode *c = mb->children; c; c = c->next) {
		if (is_plain(c, "source") && attr_is(c, "type", "file"))
			file = true;
		if (is_plain(c, "access") && attr_is(c, "mode", "shared"))
			shared = true;
	}
	x->shared_file_memory = file && shared;
}

static int parse_qemu_commandline(const xmlNode *cl, KeepRamXml *x) {
	for (const xmlNode *c = cl->children; c; c = c->next) {
		char *v;
		int r;

		if (!is_qemu(c, "arg"))
			continue;
		v = attr(c, "value");
		if (!v)
			continue;
		r = strv_extend(&x->qemu_args, v);
		xmlFree(v);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The facts from the root element's children into x. */
static int parse_children(const xmlNode *root, KeepRamXml *x) {
	bool have_uuid = false;
	int r = 0;

	for (const xmlNode *c = root->children; c && r >= 0; c = c->next) {
		if (is_plain(c, "uuid") || is_plain(c, "name")) {
			_cleanup_xml_free_ xmlChar *t = xmlNodeGetContent(c);

			if (!t)
				return -ENOMEM;
			if (is_plain(c, "name")) {
				free(x->name);
				x->name = strdup((char *)t);
				r = x->name ? 0 : -ENOMEM;
			} else if (!keep_ram_uuid_ok((char *)t))
				return -EBADMSG;
			else {
				memcpy(x->uuid, t, KEEP_RAM_UUID_LEN + 1);
				have_uuid = true;
			}
		} else if (is_plain(c, "seclabel"))
			r = parse_seclabel(c, x);
		else if (is_plain(c, "memoryBacking"))
			parse_memory_backing(c, x);
		else if (is_qemu(c, "commandline"))
			r = parse_qemu_commandline(c, x);
	}
	if (r >= 0 && !have_uuid)
		r = -EBADMSG;
	return r;
}

int keep_ram_xml_parse(const char *xml, size_t len, KeepRamXml *ret) {
	KeepRamXml x = { .id = -1 };
	unsigned long long id;
	xmlNode *root;
	xmlDoc *doc;
	char *v;
	int r;

	if (len > KEEP_RAM_XML_MAX || len > INT32_MAX)
		return -EFBIG;
	doc = xmlReadMemory(xml, (int)len, "domain.xml", NULL,
	                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc)
		return -EBADMSG;
	root = xmlDocGetRootElement(doc);
	/* libvirt never writes a DOCTYPE: one can only be someone's attempt at entities. */
	if (doc->intSubset || doc->extSubset || !root || !is_plain(root, "domain")) {
		xmlFreeDoc(doc);
		return -EBADMSG;
	}
	v = attr(root, "id");
	if (v && safe_atou64(v, &id) >= 0 && id < INT32_MAX)
		x.id = (int)id;
	xmlFree(v);
	r = parse_children(root, &x);
	xmlFreeDoc(doc);
	if (r < 0) {
		keep_ram_xml_done(&x);
		return r;
	}
	*ret = x;
	return 0;
}

bool keep_ram_xml_has_qemu_arg(const KeepRamXml *x, const char *value) {
	STRV_FOREACH (a, x->qemu_args)
		if (streq(*a, value))
			return true;
	return false;
}
