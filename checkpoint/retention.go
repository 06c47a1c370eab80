package checkpoint

// Retention: which sessions a store holds checkpoints of, since when, and removing them.
// `starter checkpoints prune` keeps a store to the sessions that may still need their files
// (those Temporal runs, and those checkpointed recently); nothing else removes a checkpoint
// but `starter delete --with-workspace`.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// StoredSession is one session a store holds checkpoints of.
type StoredSession struct {
	ID string `json:"session"`
	// Last is when its last checkpoint was stored.
	Last time.Time `json:"last_checkpoint"`
}

// Sessions lists the sessions the store holds checkpoints of, by id.
func (rd Reader) Sessions(ctx context.Context) ([]StoredSession, error) {
	var out []StoredSession
	switch {
	case isS3(rd.URL):
		st, err := rd.openS3(ctx)
		if err != nil {
			return nil, err
		}
		p := s3.NewListObjectsV2Paginator(st.client, &s3.ListObjectsV2Input{Bucket: &st.bucket, Prefix: aws.String(st.prefix)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("checkpoint store: list: %w", err)
			}
			for _, o := range page.Contents {
				id, ok := strings.CutSuffix(strings.TrimPrefix(aws.ToString(o.Key), st.prefix), "/refs")
				if ok && validSession(id) == nil {
					out = append(out, StoredSession{ID: id, Last: aws.ToTime(o.LastModified)})
				}
			}
		}
	default:
		gitDir := rd.URL
		if !isLocalPath(rd.URL) {
			tmp, err := os.MkdirTemp("", "tacp-checkpoints-")
			if err != nil {
				return nil, err
			}
			defer func() { _ = os.RemoveAll(tmp) }()
			if _, err := run(ctx, isolatedEnv(), nil, "init", "-q", "--bare", tmp); err != nil {
				return nil, err
			}
			if _, err := run(ctx, remoteEnv(), nil, "--git-dir="+tmp, "fetch", "-q", "--no-tags", "--depth=1", rd.URL, "+refs/tacp/*/head:refs/tacp/*/head"); err != nil {
				return nil, err
			}
			gitDir = tmp
		} else if _, err := os.Stat(rd.URL); err != nil {
			return nil, fmt.Errorf("checkpoint store %s: %w", rd.URL, err)
		}
		lines, err := run(ctx, isolatedEnv(), nil, "--git-dir="+gitDir, "for-each-ref", "--format=%(refname) %(committerdate:unix)", "refs/tacp/*/head")
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(lines, "\n") {
			ref, unix, ok := strings.Cut(line, " ")
			id, isHead := strings.CutSuffix(strings.TrimPrefix(ref, "refs/tacp/"), "/head")
			secs, err := strconv.ParseInt(unix, 10, 64)
			if ok && isHead && err == nil && validSession(id) == nil {
				out = append(out, StoredSession{ID: id, Last: time.Unix(secs, 0)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Delete removes the checkpoints of sessions from the store: every object of theirs in an S3
// store. A git store on this machine is then collected (git gc) with git's own grace for
// unreachable objects (two weeks since they were written): a checkpoint being taken beside
// it writes its objects before its refs, and must not lose them. A git server collects its
// own.
func (rd Reader) Delete(ctx context.Context, sessions ...string) error {
	for _, s := range sessions {
		if err := validSession(s); err != nil {
			return err
		}
	}
	st, err := &Store{URL: rd.URL}, error(nil) // a local store is not created to delete from
	if isS3(rd.URL) {
		st, err = OpenStoreWith(ctx, rd)
	}
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if err := st.deleteRefs(ctx, s); err != nil {
			return err
		}
	}
	if isLocalPath(rd.URL) && len(sessions) > 0 {
		_, err := run(ctx, isolatedEnv(), nil, "--git-dir="+rd.URL, "gc", "-q")
		return err
	}
	return nil
}

func (rd Reader) openS3(ctx context.Context) (*s3Store, error) {
	return openS3(ctx, rd.URL, rd.Keys, rd.env())
}

// env is rd's Getenv, os.Getenv when it has none.
func (rd Reader) env() func(string) string {
	if rd.Getenv != nil {
		return rd.Getenv
	}
	return os.Getenv
}
