/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The public names of org.upgraded.Upgrade1 (docs/dbus-api.md): the bus name, the object
 * paths and interfaces, the error names (docs/dbus-api.md lists when each is returned) and
 * the polkit action. The one copy the daemon and upgradectl both include; upgradectl maps
 * the errors to exit codes. */

#define UPGRADE_BUS_NAME      "org.upgraded.Upgrade1"
#define UPGRADE_OBJECT_PATH   "/org/upgraded/Upgrade1"
#define UPGRADE_MANAGER_IFACE "org.upgraded.Upgrade1.Manager"
#define UPGRADE_UPDATE_IFACE  "org.upgraded.Upgrade1.Update"
/* An update's object: UPGRADE_UPDATE_PREFIX "/" <id> (ids are hex). */
#define UPGRADE_UPDATE_PREFIX "/org/upgraded/Upgrade1/update"

#define UPGRADE_ERROR_PREFIX "org.upgraded.Upgrade1.Error."

#define UPGRADE_ERROR_INVALID_PATH      UPGRADE_ERROR_PREFIX "InvalidPath"
#define UPGRADE_ERROR_NOT_ALLOWED_PATH  UPGRADE_ERROR_PREFIX "NotAllowedPath"
#define UPGRADE_ERROR_UNSAFE_FILE       UPGRADE_ERROR_PREFIX "UnsafeFile"
#define UPGRADE_ERROR_INVALID_IMAGE     UPGRADE_ERROR_PREFIX "InvalidImage"
#define UPGRADE_ERROR_IMAGE_TOO_LARGE   UPGRADE_ERROR_PREFIX "ImageTooLarge"
#define UPGRADE_ERROR_INVALID_CMDLINE   UPGRADE_ERROR_PREFIX "InvalidCmdline"
#define UPGRADE_ERROR_INVALID_OPTION    UPGRADE_ERROR_PREFIX "InvalidOption"
#define UPGRADE_ERROR_INVALID_ID        UPGRADE_ERROR_PREFIX "InvalidId"
#define UPGRADE_ERROR_NO_SUCH_UPDATE    UPGRADE_ERROR_PREFIX "NoSuchUpdate"
#define UPGRADE_ERROR_NO_SUCH_REPORT    UPGRADE_ERROR_PREFIX "NoSuchReport"
#define UPGRADE_ERROR_ALREADY_STAGED    UPGRADE_ERROR_PREFIX "AlreadyStaged"
#define UPGRADE_ERROR_BAD_STATE         UPGRADE_ERROR_PREFIX "BadState"
#define UPGRADE_ERROR_KEXEC_UNAVAILABLE UPGRADE_ERROR_PREFIX "KexecUnavailable"
#define UPGRADE_ERROR_KEXEC_FAILED      UPGRADE_ERROR_PREFIX "KexecFailed"
#define UPGRADE_ERROR_HOOK_FAILED       UPGRADE_ERROR_PREFIX "HookFailed"
#define UPGRADE_ERROR_PERSIST_FAILED    UPGRADE_ERROR_PREFIX "PersistFailed"
#define UPGRADE_ERROR_PERMISSION_DENIED UPGRADE_ERROR_PREFIX "PermissionDenied"
#define UPGRADE_ERROR_POLICY_REFUSED    UPGRADE_ERROR_PREFIX "PolicyRefused"
#define UPGRADE_ERROR_VM_FAILED         UPGRADE_ERROR_PREFIX "VMFailed"
#define UPGRADE_ERROR_NO_SUCH_VM        UPGRADE_ERROR_PREFIX "NoSuchVM"
#define UPGRADE_ERROR_VM_RUNNING        UPGRADE_ERROR_PREFIX "VMRunning"
#define UPGRADE_ERROR_NO_SAVED_STATE    UPGRADE_ERROR_PREFIX "NoSavedState"
#define UPGRADE_ERROR_INVALID_VM_NAME   UPGRADE_ERROR_PREFIX "InvalidVMName"
#define UPGRADE_ERROR_LIBVIRT_TIMEOUT   UPGRADE_ERROR_PREFIX "LibvirtTimeout"
#define UPGRADE_ERROR_BUSY              UPGRADE_ERROR_PREFIX "Busy"
#define UPGRADE_ERROR_INVALID_CONFIG    UPGRADE_ERROR_PREFIX "InvalidConfig"
#define UPGRADE_ERROR_CANCELLED         UPGRADE_ERROR_PREFIX "Cancelled"

/* One polkit action per mutating method (units/org.upgraded.Upgrade1.policy). */
#define UPGRADE_POLKIT_ACTION_STAGE      "org.upgraded.Upgrade1.stage"
#define UPGRADE_POLKIT_ACTION_COMMIT     "org.upgraded.Upgrade1.commit"
#define UPGRADE_POLKIT_ACTION_CANCEL     "org.upgraded.Upgrade1.cancel"
#define UPGRADE_POLKIT_ACTION_RESTORE_VM "org.upgraded.Upgrade1.restore-vm"
#define UPGRADE_POLKIT_ACTION_RELOAD     "org.upgraded.Upgrade1.reload"
