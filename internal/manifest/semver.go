package manifest

import (
	"strings"

	"golang.org/x/mod/semver"
)

// ValidVersion reports whether v is a full semantic version (1.2.0,
// 1.2.0-rc.1); a leading "v" is tolerated.
func ValidVersion(v string) bool {
	c := canonical(v)
	return semver.IsValid(c) && strings.Count(strings.SplitN(strings.SplitN(c, "-", 2)[0], "+", 2)[0], ".") == 2
}

// CompareVersions orders two versions as semver; invalid ones sort first.
func CompareVersions(a, b string) int { return semver.Compare(canonical(a), canonical(b)) }

// MatchesVersionPrefix reports whether version v matches a pin such as
// "1", "1.2" or "1.2.3": whole numeric components must agree.
func MatchesVersionPrefix(v, prefix string) bool {
	v, prefix = strings.TrimPrefix(v, "v"), strings.TrimPrefix(prefix, "v")
	return v == prefix || strings.HasPrefix(v, prefix+".") || strings.HasPrefix(v, prefix+"-")
}

func canonical(v string) string {
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v
}
