// Package image pulls OCI and Docker images and keeps them unpacked in a
// cache directory, without a daemon, for sandboxes to use as their root.
// It is Linux-only (openat2, flock); elsewhere the package is empty.
//
// # References
//
// A reference is a registry's ("python:3.12-slim",
// "localhost:5000/team/env:1", "reg/x@sha256:..."; parsed by
// go-containerregistry's name package, Docker Hub by default; registries
// on localhost, 127.0.0.1, ::1 and private networks are spoken to in plain
// HTTP, others in HTTPS), or a local path: one that starts with "/", "./"
// or "../". A local path is an OCI image layout directory (it has an
// oci-layout file) or a `docker save` tarball; "DIR:tag" picks the
// layout's manifest annotated org.opencontainers.image.ref.name=tag,
// "DIR@sha256:..." one by digest, "FILE:repo:tag" one image of a tarball.
// Whether a name exists on disk never matters: "busybox" is Docker Hub's
// even in a directory that has a "busybox" file.
//
// # Layout of the cache
//
//	roots/<chain>/rootfs  the unpacked root of the layers whose OCI chain ID is <chain>
//	roots/<chain>/lock    flock'ed shared by Use; its mtime is LastUsed
//	roots/<chain>/size    bytes of rootfs
//	refs/<sha256>.json    one reference: its image ID, digest, chain ID, config, size
//	locks/<chain>.lock    flock'ed exclusively while a root is unpacked or removed
//	tmp/                  roots being unpacked, roots being deleted
//
// An image's layers are applied in order into one flattened directory,
// named by their chain ID: every sandbox of an image, and every image
// with the same layers, shares it. We flatten on purpose instead of
// keeping a directory per layer as containerd does: a sandbox mounts one
// lower directory under its overlay, no whiteout format is needed on disk
// (overlayfs's own needs device nodes or trusted.* xattrs, hence root),
// and it works rootless.
//
// A root is unpacked into tmp/ and renamed into roots/ only when complete:
// a pull cut off leaves nothing behind, and Open removes what a process
// that died while unpacking left (what no process holds the lock of).
// Concurrent pulls of one reference in one process do the work once; two
// processes pulling images of the same layers serialize on the root's
// lock, and the second finds the first's root.
//
// # Layers are hostile
//
// A layer is a tar stream from whoever published the image, applied by a
// process that may be root on the host. The rules (those of the
// workspace's tar extractor, internal/agent/workspace, plus the image
// ones):
//
//   - Names are relative to the root: a leading "/" is dropped; one that
//     leaves the root with ".." fails the pull (ErrPermission).
//   - Nothing is written outside the root: parent directories are opened
//     with openat2(RESOLVE_IN_ROOT), so symlinks of earlier entries are
//     followed as in a chroot (absolute ones lead back into the root, as
//     Docker's chroot'ed extraction does), and each entry is then created
//     or replaced by its single name in that directory, never through a
//     symlink. A file replaces what was there (it is never written
//     through an existing link).
//   - A whiteout ".wh.NAME" removes NAME of earlier layers; an opaque
//     marker ".wh..wh..opq" removes everything earlier layers put in its
//     directory, keeping the entries of its own layer (before or after the
//     marker). Neither is written to disk.
//   - Hard links are made only to entries already in the root, found
//     without following any symlink (openat2 RESOLVE_BENEATH|
//     RESOLVE_NO_SYMLINKS).
//   - Device nodes and FIFOs are skipped: sandboxes mount their root
//     nodev, and creating a device on the host is a privilege in itself.
//     (Tar has no sockets.) Other unknown entry types fail the pull.
//   - Setuid and setgid bits are stripped: the cache is on the host, where
//     a setuid-root file would be an escalation for anyone who reaches
//     it. Sticky bits, permissions and mtimes are kept; the root itself
//     is mode 0755.
//   - As root, entries get the uid and gid of the tar (image ids used as
//     host ids: the sandbox maps them with an idmapped mount); as another
//     user, they belong to that user.
//   - Only user.* extended attributes are applied: never security.* (file
//     capabilities would be host privileges), trusted.* (overlayfs's own
//     whiteouts) or system.*.
//   - Files stream to disk; nothing is held in memory. Every layer's
//     content is checked against its diff ID, from the configuration,
//     itself checked against the manifest.
//
// # Metadata is bounded
//
// Manifests, indexes and configurations are read into memory, so each is
// bounded by MaxMetadataSize (4 MiB), and an image by MaxLayers (128)
// layers: a size declared over the bound (a manifest's Content-Length, a
// configuration's size in its manifest, a layout's file) is refused
// before anything is read, and what does not declare one is cut off at
// the bound. Every other answer of a registry but a blob's content (an
// error, a token, a redirect) is bounded the same way. The errors match
// execbox.ErrResourceExhausted and name what was too large.
//
// With Options.MaxSize, unpacking is bounded too: every entry written is
// counted (its content plus 4 KiB, so that a layer of empty files is
// bounded by its inodes) against MaxSize less the store's roots and what
// its other unpacks in progress took. When that runs out, roots no
// sandbox uses are removed, least recently used first; when none is
// left, the pull stops at that entry, its temporary root removed, with
// an error matching execbox.ErrResourceExhausted. The store never holds
// more than MaxSize, even in the middle of a pull (of this process: two
// processes sharing a store each count their own unpacks).
//
// # Tenants' pulls
//
// A pull whose context internal/netguard.ForTenant marked (execbox
// serve marks the creates of non-admin keys, after checking the
// registry against server.tenant_registries) connects to the registry
// its reference names, and elsewhere (redirects, token realms, foreign
// layer URLs) only to addresses Options.TenantAddr allows (public ones
// by default), checked on the IP each connection uses, so that a name
// resolving to loopback is refused too. Its errors tell a registry's
// answer by its status, never its body. It does not share its work with
// another pull of the same reference.
package image
