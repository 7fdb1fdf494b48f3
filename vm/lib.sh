# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
# Shared settings of the vm/ scripts: where the cache lives and which tree we use.

LIBARENA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIBARENA_CACHE=${LIBARENA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/libarena}
KERNEL_TARBALL=${KERNEL_TARBALL:-/usr/src/linux-source-6.12.tar.xz}

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
log() { echo "[$(basename "$0")] $*" >&2; }

# Version of the packaged tree, e.g. 6.12.118-1~deb12u1; part of every cache key.
tree_version() {
	dpkg-query -W -f '${Version}' linux-source-6.12 2>/dev/null ||
		stat -c %Y "$KERNEL_TARBALL"
}

# What identifies the tarball itself: another KERNEL_TARBALL must not reuse the cache.
tree_key() {
	{ tree_version; stat -L -c '%n %s %Y' "$KERNEL_TARBALL"; } | sha256sum | cut -c1-8
}

# Apply a patch to a tree that is not a git work tree: GNU patch, so that a cache inside
# some other git work tree cannot make git apply skip files silently. Fails unless the
# whole patch applies cleanly.
apply_patch() {
	local dir=$1 p=$2
	patch -d "$dir" -p1 -s -f --dry-run <"$p" >/dev/null &&
		patch -d "$dir" -p1 -s -f <"$p" >/dev/null
}

# The pristine tree, extracted once per package version. Never modified.
pristine_tree() {
	local ver dir
	ver=$(tree_version | tr '~:' '__')
	dir=$LIBARENA_CACHE/pristine-$ver-$(tree_key)
	if [ ! -f "$dir/.complete" ]; then
		[ -f "$KERNEL_TARBALL" ] || die "$KERNEL_TARBALL missing: install linux-source-6.12"
		log "extracting $KERNEL_TARBALL into $dir"
		rm -rf "$dir" "$dir.tmp"
		mkdir -p "$dir.tmp"
		tar -C "$dir.tmp" --strip-components=1 -xf "$KERNEL_TARBALL"
		touch "$dir.tmp/.complete"
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir"
}

# The kernel-side patches: they change what gets built into the guest kernel.
kernel_patches() {
	ls "$LIBARENA_ROOT"/kernel/patches/*.patch 2>/dev/null | sort
}

# Cache key of the guest kernel: tree, config fragment, kernel patches.
kernel_key() {
	{
		tree_key
		cat "$LIBARENA_ROOT/kernel/config.fragment"
		kernel_patches | while read -r p; do cat "$p"; done
	} | sha256sum | cut -c1-16
}

kernel_dir() {
	echo "$LIBARENA_CACHE/kernel-$(kernel_key)"
}

# Fixes to the tree's tools (libbpf, bpftool): part of the series, but they change only
# what is built in tools_dir, never the guest kernel.
tools_patches() {
	ls "$LIBARENA_ROOT"/kernel/tools-patches/*.patch 2>/dev/null | sort
}

# Where libbpf and bpftool are built: they depend on the tree and on both kinds of patch.
tools_dir() {
	local key
	key=$( { tree_key; { kernel_patches; tools_patches; } | while read -r p; do cat "$p"; done; } |
		sha256sum | cut -c1-16)
	echo "$LIBARENA_CACHE/tools-$key"
}

# Debian's stock kernel of the same release as the tree (same source package, same
# version): what users who build no kernel run. STOCK_KERNEL_PKG=NAME=VERSION picks
# another. Cached unpacked under $LIBARENA_CACHE/stock-NAME-VERSION by vm/stock-kernel.
stock_pkg() {
	if [ -n "${STOCK_KERNEL_PKG:-}" ]; then
		echo "$STOCK_KERNEL_PKG"
		return
	fi
	local ver distro
	ver=$(dpkg-query -W -f '${Version}' linux-source-6.12 2>/dev/null) ||
		die "linux-source-6.12 is not installed (make deps), or set STOCK_KERNEL_PKG"
	distro=$(. /etc/os-release && echo "${VERSION_ID%%.*}")
	# 6.12.118-1~deb12u1 -> linux-image-6.12.118+deb12-amd64-unsigned=6.12.118-1~deb12u1
	echo "linux-image-${ver%%-*}+deb$distro-amd64-unsigned=$ver"
}

stock_dir() {
	local pkg
	pkg=$(stock_pkg) || exit 1
	echo "$LIBARENA_CACHE/stock-$(echo "${pkg#linux-image-}" | tr '=~:+' '-___')"
}
