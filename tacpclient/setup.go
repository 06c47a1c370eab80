package tacpclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/tacp-dev/tacp/signals"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// SearchAttributeTypes are the custom search attributes of contract §2 and their types.
var SearchAttributeTypes = map[string]enumspb.IndexedValueType{
	signals.SearchAttrSessionState:     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	signals.SearchAttrTurn:             enumspb.INDEXED_VALUE_TYPE_INT,
	signals.SearchAttrAgent:            enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	signals.SearchAttrAwaitingApproval: enumspb.INDEXED_VALUE_TYPE_BOOL,
	signals.SearchAttrLastOutcome:      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	signals.SearchAttrLastActivity:     enumspb.INDEXED_VALUE_TYPE_DATETIME,
	signals.SearchAttrWaitingUntil:     enumspb.INDEXED_VALUE_TYPE_DATETIME,
	signals.SearchAttrOwner:            enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	signals.SearchAttrSharing:          enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	signals.SearchAttrSharedWith:       enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

// EnsureSearchAttributes registers on namespace the search attributes it lacks, and returns
// the names it added. It needs the operator API (an admin's credentials on a cluster).
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	op := c.OperatorService()
	resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	var names []string
	for _, name := range []string{signals.SearchAttrSessionState, signals.SearchAttrTurn, signals.SearchAttrAgent, signals.SearchAttrAwaitingApproval, signals.SearchAttrLastOutcome, signals.SearchAttrLastActivity, signals.SearchAttrWaitingUntil, signals.SearchAttrOwner, signals.SearchAttrSharing, signals.SearchAttrSharedWith} {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing[name] = SearchAttributeTypes[name]
			names = append(names, name)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return nil, fmt.Errorf("add search attributes to %s: %w", namespace, err)
	}
	return names, nil
}
