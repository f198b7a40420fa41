/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The few facts keep-ram needs from a domain XML, read with libxml2 from the elements where
 * libvirt puts them and nowhere else: text a VM's owner controls (<title>, <description>,
 * <metadata>, any foreign namespace) never counts, however it is spelled. Shared by the daemon
 * (the live XML) and upgraded-libvirt-hook (the XML libvirt hands the "start" hook).
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define KEEP_RAM_UUID_LEN       36
#define KEEP_RAM_XML_MAX        (16 * 1024 * 1024)
#define KEEP_RAM_QEMU_NS        "http://libvirt.org/schemas/domain/qemu/1.0"
/* libvirt's short name of a domain: its id, '-', and at most this many characters of its name
 * (virDomainDefGetShortName()), the name of its memory directory. */
#define KEEP_RAM_SHORT_NAME_MAX 20

typedef struct KeepRamXml {
	char uuid[KEEP_RAM_UUID_LEN + 1];
	int id;     /* /domain/@id; -1 when the domain is not running */
	char *name; /* /domain/name */
	/* /domain/seclabel[@model='dac']/label as "+UID:+GID" or names */
	bool has_dac_owner;
	uid_t dac_uid;
	gid_t dac_gid;
	/* /domain/memoryBacking has <source type='file'/> and <access mode='shared'/> */
	bool shared_file_memory;
	/* Every /domain/qemu:commandline/qemu:arg/@value (libvirt's qemu namespace), in order. */
	char **qemu_args;
} KeepRamXml;

void keep_ram_xml_done(KeepRamXml *x);

/*
 * Parses xml (len bytes, at most KEEP_RAM_XML_MAX; no network, no external entities, no
 * DOCTYPE). -EBADMSG: not a domain XML, or its <uuid> is missing or malformed; -EFBIG: too
 * large; -EINVAL: a DAC label that cannot be read. *ret untouched on failure.
 */
int keep_ram_xml_parse(const char *xml, size_t len, KeepRamXml *ret);

/* Whether the parsed domain passes exactly value as one qemu:arg. */
bool keep_ram_xml_has_qemu_arg(const KeepRamXml *x, const char *value);

/* Whether s is a uuid in libvirt's form (8-4-4-4-12 hex digits). */
bool keep_ram_uuid_ok(const char *s);
