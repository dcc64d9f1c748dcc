# Sourced by openpmix/build.sh and testdata/debroot.sh: debian_mirror prints
# the Debian mirror the machine's apt sources name (deb822 or one-line
# form, security suites aside), else deb.debian.org.
debian_mirror() {
	local m
	m=$(sed -n 's/^URIs: *\(http[^ ]*debian\/*\)$/\1/p; s/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*debian\/*\) .*/\2/p' \
		/etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		grep -v -- '-security' | head -1 || true)
	m=${m:-http://deb.debian.org/debian}
	echo "${m%/}"
}
