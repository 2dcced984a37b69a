#!/bin/sh
# BuildKit's SBOM scanning protocol (moby/buildkit docs/attestations/sbom-protocol.md), POSIX sh and awk:
# every root filesystem named by BUILDKIT_SCAN_SOURCE (and each folder of BUILDKIT_SCAN_SOURCE_EXTRAS, when
# set and present) gets one in-toto statement, $BUILDKIT_SCAN_DESTINATION/<name>.spdx.json, whose predicate is an
# SPDX 2.3 document listing the Debian packages that filesystem's var/lib/dpkg/status says are installed. A
# filesystem without dpkg gets a document with no packages (the scan ran; it found none).
set -eu

: "${BUILDKIT_SCAN_SOURCE:?BUILDKIT_SCAN_SOURCE is not set (run by BuildKit as an SBOM generator)}"
: "${BUILDKIT_SCAN_DESTINATION:?BUILDKIT_SCAN_DESTINATION is not set (run by BuildKit as an SBOM generator)}"

TOOL="ghbuild-sbom-scanner-1"

scan() {
    root=$1
    name=$(basename "$root")
    status="$root/var/lib/dpkg/status"
    [ -f "$status" ] || status=/dev/null
    # The distribution's purl namespace (debian, ubuntu, ...), from the scanned filesystem's os-release.
    distro=$(awk -F= '$1 == "ID" { gsub(/"/, "", $2); print $2; exit }' \
        "$root/etc/os-release" "$root/usr/lib/os-release" 2>/dev/null || true)
    # The namespace is unique per content: the same filesystem gives the same document name.
    hash=$(cat "$status" | sha256sum | cut -d' ' -f1)
    created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    out="$BUILDKIT_SCAN_DESTINATION/$name.spdx.json"
    awk -v name="$name" -v distro="${distro:-debian}" -v hash="$hash" -v created="$created" -v tool="$TOOL" '
        function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s); return s }
        function emit() {
            if (pkg != "" && state ~ / installed$/) {
                n++
                id = pkg "-" arch; gsub(/[^A-Za-z0-9.-]/, "-", id)
                id = "SPDXRef-Package-deb-" n "-" id
                purl = "pkg:deb/" distro "/" pkg "@" ver "?arch=" arch
                packages = packages (n > 1 ? "," : "") "\n    {\"SPDXID\": \"" esc(id) "\", \"name\": \"" esc(pkg) \
                    "\", \"versionInfo\": \"" esc(ver) "\", \"downloadLocation\": \"NOASSERTION\", " \
                    "\"filesAnalyzed\": false, \"licenseConcluded\": \"NOASSERTION\", " \
                    "\"licenseDeclared\": \"NOASSERTION\", \"copyrightText\": \"NOASSERTION\", " \
                    "\"externalRefs\": [{\"referenceCategory\": \"PACKAGE-MANAGER\", \"referenceType\": \"purl\", " \
                    "\"referenceLocator\": \"" esc(purl) "\"}]}"
                relations = relations (n > 1 ? "," : "") "\n    {\"spdxElementId\": \"SPDXRef-DOCUMENT\", " \
                    "\"relationshipType\": \"DESCRIBES\", \"relatedSpdxElement\": \"" esc(id) "\"}"
            }
            pkg = ""; ver = ""; arch = ""; state = ""
        }
        /^$/ { emit(); next }
        /^Package: / { pkg = substr($0, 10) }
        /^Version: / { ver = substr($0, 10) }
        /^Architecture: / { arch = substr($0, 15) }
        /^Status: / { state = substr($0, 9) }
        END {
            emit()
            printf "{\"_type\": \"https://in-toto.io/Statement/v0.1\", \"predicateType\": \"https://spdx.dev/Document\", "
            printf "\"subject\": [],\n \"predicate\": {\"spdxVersion\": \"SPDX-2.3\", \"dataLicense\": \"CC0-1.0\", "
            printf "\"SPDXID\": \"SPDXRef-DOCUMENT\", \"name\": \"%s\",\n  ", esc(name)
            printf "\"documentNamespace\": \"https://ghbuild.invalid/spdx/%s-%s\",\n  ", esc(name), hash
            printf "\"creationInfo\": {\"created\": \"%s\", \"creators\": [\"Tool: %s\"]},\n  ", created, tool
            printf "\"packages\": [%s],\n  \"relationships\": [%s]}}\n", packages, relations
        }
    ' "$status" > "$out"
}

scan "$BUILDKIT_SCAN_SOURCE"
extras=${BUILDKIT_SCAN_SOURCE_EXTRAS:-}
if [ -n "$extras" ] && [ -d "$extras" ]; then
    for extra in "$extras"/*; do
        if [ -d "$extra" ]; then scan "$extra"; fi
    done
fi
