package main

// The namespace: registering it and tacp's search attributes on the cluster, and a probe
// workflow that proves the services serve both; with the dial and sleep helpers and the
// quiet SDK logger that chaos uses too.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
)

// register registers the namespace and tacp's search attributes, then waits until a
// workflow can upsert all of them: that proves frontend, history and matching serve the
// namespace and every service's caches know the attributes.
func (st *State) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	nc, err := retryDial(ctx, func() (client.NamespaceClient, error) {
		return client.NewNamespaceClient(client.Options{HostPort: st.Frontend(), Logger: quietLogger()})
	})
	if err != nil {
		return err
	}
	defer nc.Close()
	for {
		err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			break
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			return fmt.Errorf("register namespace %s: %w", namespace, err)
		}
	}
	c, err := retryDial(ctx, func() (client.Client, error) {
		return client.Dial(client.Options{HostPort: st.Frontend(), Namespace: namespace, Logger: quietLogger()})
	})
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		_, err = tacpclient.EnsureSearchAttributes(ctx, c, namespace)
		if err == nil {
			break
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			return fmt.Errorf("search attributes: %w", err)
		}
	}
	return probe(ctx, c)
}

// probeWorkflow upserts every tacp search attribute, as SessionWorkflow does.
func probeWorkflow(ctx workflow.Context) error {
	return workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrSessionState).ValueSet(signals.StateIdle),
		temporal.NewSearchAttributeKeyInt64(signals.SearchAttrTurn).ValueSet(0),
		temporal.NewSearchAttributeKeyKeyword(signals.SearchAttrAgent).ValueSet("probe"),
		temporal.NewSearchAttributeKeyBool(signals.SearchAttrAwaitingApproval).ValueSet(false),
	)
}

func probe(ctx context.Context, c client.Client) error {
	queue := "tacp-cluster-probe-" + signals.NewID()[:8]
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(probeWorkflow, workflow.RegisterOptions{Name: "TacpClusterProbe"})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		run, err := c.ExecuteWorkflow(pctx, client.StartWorkflowOptions{
			ID: "tacp-cluster-probe-" + signals.NewID(), TaskQueue: queue,
			WorkflowExecutionTimeout: 30 * time.Second,
		}, "TacpClusterProbe")
		if err == nil {
			err = run.Get(pctx, nil)
		}
		cancel()
		if err == nil {
			return nil
		}
		if serr := sleepCtx(ctx, time.Second); serr != nil {
			return fmt.Errorf("probe workflow: %w", err)
		}
	}
}

func retryDial[T any](ctx context.Context, dial func() (T, error)) (T, error) {
	for {
		c, err := dial()
		if err == nil {
			return c, nil
		}
		if serr := sleepCtx(ctx, 500*time.Millisecond); serr != nil {
			var zero T
			return zero, fmt.Errorf("dial frontend: %w", err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func quietLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }
