package workflows

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// Blobs carry values of any size between a workflow and its run folder in
// parts of wfapi.BlobPartBytes, so no activity input or result passes
// Temporal's payload limits (docs/limits.md). The workflow computes the
// digest itself: what it reads back is exactly what it stored.

// storeBlob stores v as the blob name of run's folder ("": this
// workflow's): every part but the last, partsInFlight at a time, then the
// last, which seals the blob.
func storeBlob(ctx workflow.Context, opts workflow.ActivityOptions, run, name string, v any) (wfapi.Blob, error) {
	// encoding/json writes map keys sorted: the same bytes on every replay.
	//workflowcheck:ignore
	raw, err := json.Marshal(v)
	if err != nil {
		return wfapi.Blob{}, err
	}
	sum := sha256.Sum256(raw)
	b := wfapi.Blob{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: len(raw), Parts: max(1, (len(raw)+wfapi.BlobPartBytes-1)/wfapi.BlobPartBytes)}
	actx := workflow.WithActivityOptions(ctx, opts)
	part := func(k int) []byte { return raw[k*wfapi.BlobPartBytes : min(len(raw), (k+1)*wfapi.BlobPartBytes)] }
	group := b.Parts - 1
	if group > partsInFlight && versionOf(ctx, changeBlobGroups) >= 1 {
		group = partsInFlight
	}
	for from := 0; from < b.Parts-1; from += group {
		futures := make([]workflow.Future, 0, group)
		for k := from; k < min(from+group, b.Parts-1); k++ {
			futures = append(futures, workflow.ExecuteActivity(actx, wfapi.PutBlobActivity, wfapi.PutBlobInput{Run: run, Name: name, Part: k, Data: part(k)}))
		}
		for _, f := range futures {
			if err := f.Get(ctx, nil); err != nil {
				return b, err
			}
		}
	}
	last := wfapi.PutBlobInput{Run: run, Name: name, Part: b.Parts - 1, Data: part(b.Parts - 1), Seal: &b}
	return b, workflow.ExecuteActivity(actx, wfapi.PutBlobActivity, last).Get(ctx, nil)
}

// partsInFlight bounds the parts one workflow task sends: their inputs
// travel in its completion, which the server refuses past 4 MB (a 33-part
// checkpoint was refused, and the run stuck, before parts were grouped).
const partsInFlight = 4

// loadBlob reads blob b back into v, refusing it unless its size and
// digest are those recorded.
func loadBlob(ctx workflow.Context, opts workflow.ActivityOptions, run string, b wfapi.Blob, v any) error {
	if b.Parts < 1 || b.Parts > 1<<16 || b.Size > b.Parts*wfapi.BlobPartBytes {
		return fmt.Errorf("blob %s: %d parts of %d bytes", b.Name, b.Parts, b.Size)
	}
	actx := workflow.WithActivityOptions(ctx, opts)
	futures := make([]workflow.Future, b.Parts)
	for k := range futures {
		futures[k] = workflow.ExecuteActivity(actx, wfapi.GetBlobActivity, wfapi.GetBlobInput{Run: run, Name: b.Name, Part: k, SHA256: b.SHA256})
	}
	var buf bytes.Buffer
	for _, f := range futures {
		var part []byte
		if err := f.Get(ctx, &part); err != nil {
			return err
		}
		buf.Write(part)
	}
	sum := sha256.Sum256(buf.Bytes())
	if buf.Len() != b.Size || hex.EncodeToString(sum[:]) != b.SHA256 {
		return fmt.Errorf("blob %s does not match the digest recorded for it", b.Name)
	}
	// Decoding into a typed value is deterministic (reflection, no map order).
	//workflowcheck:ignore
	return json.Unmarshal(buf.Bytes(), v)
}
