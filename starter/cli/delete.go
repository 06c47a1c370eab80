package cli

// starter delete: close the session and remove what tacp keeps of it.

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/tacp-dev/tacp/signals"
)

func cmdDelete(ctx context.Context, e *env, fs *flag.FlagSet, args []string) int {
	withWorkspace := fs.Bool("with-workspace", false, "also remove the session's workspace (only one tacp created for it)")
	history := fs.Bool("history", false, "also delete the session's workflow history now (else the namespace's retention does, after the session ends)")
	reason := fs.String("reason", "deleted", "why (journaled in session.closed)")
	as := fs.String("as", "", "who deletes, as the journal records it (default: cli:USER@HOST)")
	if !e.parse(fs, args, true) {
		return exitError
	}
	if err := e.connect(ctx); err != nil {
		return e.fail(err)
	}
	if _, err := e.c.Close(ctx, e.session, signals.CloseRequest{Reason: *reason, By: cliIdentity(*as), Delete: true, DeleteWorkspace: *withWorkspace}); err != nil {
		return e.fail(err)
	}
	// The session ends once its turn has: then the journal says what went.
	wfID := signals.SessionWorkflowID(e.session)
	if err := e.c.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, nil); err != nil {
		return e.fail(fmt.Errorf("waiting for the session to end: %w", err))
	}
	var deleted signals.SessionDeletedData
	after := int64(0)
	for {
		res, err := e.c.Events(ctx, e.session, after, 0)
		if err != nil {
			return e.fail(err)
		}
		for _, ev := range res.Events {
			if ev.Kind == signals.EventSessionDeleted {
				_ = json.Unmarshal(ev.Data, &deleted)
			}
			after = ev.Seq
		}
		if len(res.Events) == 0 || after >= res.LastSeq {
			break
		}
	}
	if *history {
		ns := e.namespace
		if ns == "" {
			ns = cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default")
		}
		_, err := e.c.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wfID},
		})
		if err != nil {
			return e.fail(fmt.Errorf("delete the history: %w", err))
		}
	}
	if e.json {
		e.printJSON(deleted)
		return exitOK
	}
	switch {
	case deleted.Error != "":
		fmt.Fprintf(e.out, "closed; the worker could not remove its data: %s\n", deleted.Error)
	case deleted.Host == "":
		fmt.Fprintln(e.out, "closed; no worker held its data")
	}
	for _, r := range deleted.Removed {
		fmt.Fprintf(e.out, "removed  %s\n", r)
	}
	for _, k := range deleted.Kept {
		fmt.Fprintf(e.out, "kept     %s\n", k)
	}
	if *history {
		fmt.Fprintln(e.out, "removed  the workflow history")
	}
	if deleted.Error != "" {
		return exitError
	}
	return exitOK
}
