package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/asnobody"
)

// The hostile tests again as another user (nobody): a worker that is not
// root has a zygote in a user namespace of its own and no cgroups (it may
// not make them under root's), so the one zygote without cgroups forks its
// steps. Both ways must hold what they hold for root.
func TestHostileAsAnotherUser(t *testing.T) {
	if asnobody.Inside() {
		t.Skip("this is the run as the other user")
	}
	if os.Geteuid() != 0 {
		t.Skip("the suite runs as another user already: its own run is this test")
	}
	// (TestHostSocketsAreHidden makes its socket in /run: root's alone.)
	hostile := []string{"TestWritesOnlyInTheStepFolder", "TestNoNetworkButItsOwnLoopback", "TestNothingOutlivesTheStep",
		"TestKernelSettingsAreReadOnly", "TestWriteFoldersAvoidWhatTheEngineTrusts",
		"TestNoKeyringNoNamespaces", "TestNoSetIDPlants", "TestOtherRunsAreNotSeen", "TestZygoteFindings", "TestWriteFoldersByHandle",
		"TestTerminateAsksTheToolFirst", "TestInheritedDescriptorsStayOut", "TestOnlyTheWorkersPathIsBoundBack",
		"TestAGivenFileNotBoundIsNotHandedOver", "TestAHomeThroughALinkIsHidden",
		"TestAHiddenFileThroughALinkStaysHidden"}
	// Checked whole: the zygote's alone, or ways within cases.
	whole := []string{"TestTheStepsMountsGoWithIt", "TestHiddenByEveryName"}
	out := asnobody.Run(t, append(hostile, whole...))
	for _, name := range hostile {
		for _, w := range []string{WayZygote, WayBubblewrap} {
			if !strings.Contains(out, "--- PASS: "+name+"/"+w+" ") {
				t.Errorf("%s/%s did not pass as nobody:\n%s", name, w, out)
			}
		}
	}
	for _, name := range whole {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as nobody:\n%s", name, out)
		}
	}
}
