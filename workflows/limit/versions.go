package limit

import "go.temporal.io/sdk/workflow"

// The limit workflow's changes. They are declared, with their recorded
// histories, in workflows/versions.go's Changes (the one change list,
// whose tests replay them and check Latest against it); the ID is here
// because this package cannot import that one.
const ChangeTrust = "limit-trusts-nobody"

// Latest is each change's latest version.
var Latest = map[string]workflow.Version{ChangeTrust: 1}

// versionOf is the version of change id a limit takes (no baseline: a
// limit workflow asks each change it reaches).
func versionOf(ctx workflow.Context, id string) workflow.Version {
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, Latest[id])
}
