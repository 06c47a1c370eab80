package checkpoint

// The S3-compatible store: for workers on machines that share no disk and no git server.
// Objects, under the URL's prefix:
//
//	<session>/refs              the session's refs, "<commit> <ref>" lines (the manifest)
//	<session>/turns/<N>.bundle  a git bundle of turn N's checkpoint
//
// A turn's bundle holds only the commits the store does not hold yet for the session (it
// excludes the last commit this worker pushed or fetched, refs/tacp-stored/<session>), so a
// turn costs what it changed. The first checkpoint of a session, and of a chain that moved
// (a fork's first turn, a rerun of a lost turn), is a whole bundle. The manifest is written
// after the bundle, so a reader never meets a ref whose bundle is missing.
//
// With codec keys set, every object is sealed with the current key (AES-256-GCM, the key id
// in clear), and opened with any key of the keyring: the store holds no readable file.
//
// The store's credentials are the worker's: TACP_S3_ACCESS_KEY_ID, TACP_S3_SECRET_ACCESS_KEY
// (and TACP_S3_SESSION_TOKEN), which no agent sees (TACP_ is hidden from agents), else the
// AWS SDK's default chain (AWS_* variables, shared files, the instance's role).

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tacp-dev/tacp/codec"
)

// Environment variables of the S3 store's credentials.
const (
	EnvS3AccessKeyID     = "TACP_S3_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "TACP_S3_SECRET_ACCESS_KEY"
	EnvS3SessionToken    = "TACP_S3_SESSION_TOKEN"
)

// sealMagic starts an object sealed with a codec key: magic, key id, newline, then the
// AES-256-GCM nonce, ciphertext and tag.
const sealMagic = "tacp-sealed-1 "

// storedRef records, in a shadow, the last commit of the session the S3 store is known to
// hold: what the next bundle may leave out.
func storedRef(session string) string { return "refs/tacp-stored/" + session }

// isS3 reports whether url names an S3-compatible store (s3://bucket/prefix?...).
func isS3(url string) bool { return strings.HasPrefix(url, "s3://") }

type s3Store struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	keys   *codec.Keys
}

// openS3 reads an s3://BUCKET[/PREFIX][?endpoint=URL&region=R&path_style=0|1] store. The
// endpoint defaults to the SDK's (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS itself);
// path-style addressing is on when the URL names an endpoint (what S3-compatible servers
// expect) unless path_style=0. The bucket is created when it does not exist.
func openS3(ctx context.Context, raw string, keys *codec.Keys, getenv func(string) string) (*s3Store, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return nil, fmt.Errorf("checkpoint store %q: want s3://BUCKET[/PREFIX][?endpoint=URL&region=REGION]", raw)
	}
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "region" && k != "path_style" {
			return nil, fmt.Errorf("checkpoint store %q: unknown parameter %q (endpoint, region, path_style)", raw, k)
		}
	}
	var opts []func(*awsconfig.LoadOptions) error
	if r := q.Get("region"); r != "" {
		opts = append(opts, awsconfig.WithRegion(r))
	}
	if id := getenv(EnvS3AccessKeyID); id != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			id, getenv(EnvS3SecretAccessKey), getenv(EnvS3SessionToken))))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %q: %w", raw, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	endpoint := q.Get("endpoint")
	pathStyle := endpoint != ""
	if v := q.Get("path_style"); v != "" {
		if pathStyle, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("checkpoint store %q: path_style=%q: want 0 or 1", raw, v)
		}
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
		// Checksums only where the API needs them: what every S3-compatible server takes.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	st := &s3Store{client: client, bucket: u.Host, prefix: strings.Trim(u.Path, "/"), keys: keys}
	if st.prefix != "" {
		st.prefix += "/"
	}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &st.bucket}); err != nil {
		if _, cerr := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &st.bucket}); cerr != nil {
			return nil, fmt.Errorf("checkpoint store %q: bucket %s is not reachable (%v) and cannot be created: %w", raw, st.bucket, err, cerr)
		}
	}
	return st, nil
}

func (st *s3Store) key(session, name string) string { return st.prefix + session + "/" + name }

func bundleName(turn int64) string { return "turns/" + strconv.FormatInt(turn, 10) + ".bundle" }

// push uploads turn's bundle, then the manifest with the session's new head and turn refs.
func (st *s3Store) push(ctx context.Context, r *repo, session string, turn int64) error {
	id, err := r.revParse(ctx, TurnRef(session, turn))
	if err != nil {
		return err
	}
	stored, _ := r.revParse(ctx, storedRef(session))
	if stored != id {
		args := []string{"bundle", "create", "-q", "", TurnRef(session, turn)}
		if stored != "" {
			if _, err := r.git(ctx, nil, "merge-base", "--is-ancestor", stored, id); err == nil {
				args = append(args, "^"+stored)
			}
		}
		tmp, err := os.MkdirTemp("", "tacp-bundle-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		args[3] = filepath.Join(tmp, "b")
		if _, err := r.git(ctx, nil, args...); err != nil {
			return err
		}
		b, err := os.ReadFile(args[3])
		if err != nil {
			return err
		}
		if err := st.put(ctx, st.key(session, bundleName(turn)), b); err != nil {
			return err
		}
	}
	refs, err := st.manifest(ctx, session)
	if err != nil {
		return err
	}
	refs[HeadRef(session)] = id
	refs[TurnRef(session, turn)] = id
	if err := st.put(ctx, st.key(session, "refs"), formatManifest(refs)); err != nil {
		return err
	}
	_, err = r.git(ctx, []byte("update "+storedRef(session)+" "+id+"\n"), "update-ref", "--stdin")
	return err
}

// fetch brings the session's refs, and the bundles of the commits gitDir lacks, into r.
func (st *s3Store) fetch(ctx context.Context, r *repo, session string) error {
	refs, err := st.manifest(ctx, session)
	if err != nil || len(refs) == 0 {
		return err
	}
	turns := turnsOf(session, refs)
	tmp, err := os.MkdirTemp("", "tacp-bundle-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	held, err := r.commits(ctx, refs)
	if err != nil {
		return err
	}
	for _, turn := range turns {
		ref := TurnRef(session, turn)
		if held[refs[ref]] {
			continue
		}
		b, err := st.get(ctx, st.key(session, bundleName(turn)))
		if err != nil {
			return fmt.Errorf("checkpoint of turn %d: %w", turn, err)
		}
		file := filepath.Join(tmp, strconv.FormatInt(turn, 10)+".bundle")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return err
		}
		if _, err := r.git(ctx, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", file, "+"+ref+":"+ref); err != nil {
			return err
		}
	}
	if held, err = r.commits(ctx, refs); err != nil {
		return err
	}
	var up strings.Builder
	for _, name := range sortedKeys(refs) {
		if held[refs[name]] {
			fmt.Fprintf(&up, "update %s %s\n", name, refs[name])
		}
	}
	if head := refs[HeadRef(session)]; head != "" {
		fmt.Fprintf(&up, "update %s %s\n", storedRef(session), head)
	}
	_, err = r.git(ctx, []byte(up.String()), "update-ref", "--stdin")
	return err
}

// commits reports which of the refs' commits r holds, in one git process.
func (r *repo) commits(ctx context.Context, refs map[string]string) (map[string]bool, error) {
	var in strings.Builder
	for _, id := range refs {
		in.WriteString(id + "\n")
	}
	out, err := r.git(ctx, []byte(in.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if id, typ, _ := strings.Cut(line, " "); typ == "commit" {
			held[id] = true
		}
	}
	return held, nil
}

// head is the commit of the session's last checkpoint in the store ("": none).
func (st *s3Store) head(ctx context.Context, session string) (string, error) {
	refs, err := st.manifest(ctx, session)
	return refs[HeadRef(session)], err
}

// deleteSession removes every object of the session.
func (st *s3Store) deleteSession(ctx context.Context, session string) error {
	p := s3.NewListObjectsV2Paginator(st.client, &s3.ListObjectsV2Input{Bucket: &st.bucket, Prefix: aws.String(st.key(session, ""))})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("checkpoint store: list %s: %w", st.key(session, ""), err)
		}
		for _, o := range page.Contents {
			if _, err := st.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &st.bucket, Key: o.Key}); err != nil {
				return fmt.Errorf("checkpoint store: delete %s: %w", aws.ToString(o.Key), err)
			}
		}
	}
	return nil
}

// manifest reads the session's refs (empty: the store holds no checkpoint of it).
func (st *s3Store) manifest(ctx context.Context, session string) (map[string]string, error) {
	refs := map[string]string{}
	b, err := st.get(ctx, st.key(session, "refs"))
	if errors.Is(err, errNoObject) {
		return refs, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := "refs/tacp/" + session + "/"
	for _, line := range strings.Split(string(b), "\n") {
		id, name, ok := strings.Cut(line, " ")
		if ok && strings.HasPrefix(name, prefix) && len(id) >= 40 {
			refs[name] = id
		}
	}
	return refs, nil
}

func formatManifest(refs map[string]string) []byte {
	var b bytes.Buffer
	for _, name := range sortedKeys(refs) {
		fmt.Fprintf(&b, "%s %s\n", refs[name], name)
	}
	return b.Bytes()
}

// turnsOf lists the turns the refs hold a checkpoint of, in order.
func turnsOf(session string, refs map[string]string) []int64 {
	var turns []int64
	prefix := "refs/tacp/" + session + "/turns/"
	for name := range refs {
		if n, ok := strings.CutPrefix(name, prefix); ok {
			if t, err := strconv.ParseInt(n, 10, 64); err == nil {
				turns = append(turns, t)
			}
		}
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i] < turns[j] })
	return turns
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var errNoObject = errors.New("no such object")

func (st *s3Store) put(ctx context.Context, key string, b []byte) error {
	body, err := st.seal(b)
	if err != nil {
		return err
	}
	_, err = st.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &st.bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
	if err != nil {
		return fmt.Errorf("checkpoint store: put %s: %w", key, err)
	}
	return nil
}

func (st *s3Store) get(ctx context.Context, key string) ([]byte, error) {
	out, err := st.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &st.bucket, Key: &key})
	if err != nil {
		var nsk *s3types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil, errNoObject
		}
		return nil, fmt.Errorf("checkpoint store: get %s: %w", key, err)
	}
	defer func() { _ = out.Body.Close() }()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: get %s: %w", key, err)
	}
	return st.open(key, b)
}

// seal encrypts b with the current codec key; without keys b is stored as it is.
func (st *s3Store) seal(b []byte) ([]byte, error) {
	if st.keys == nil {
		return b, nil
	}
	aead, err := gcm(st.keys.ByID[st.keys.Current])
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: codec key %q: %w", st.keys.Current, err)
	}
	head := sealMagic + st.keys.Current + "\n"
	return aead.Seal([]byte(head), nil, b, []byte(head)), nil
}

// open decrypts a sealed object with the key its header names.
func (st *s3Store) open(key string, b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(sealMagic)) {
		return b, nil
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, fmt.Errorf("checkpoint store: %s: a sealed object without its key id", key)
	}
	id := string(b[len(sealMagic):nl])
	if st.keys == nil || st.keys.ByID[id] == nil {
		return nil, fmt.Errorf("checkpoint store: %s is sealed with codec key %q, which this process does not hold (%s)", key, id, codec.EnvKeys)
	}
	aead, err := gcm(st.keys.ByID[id])
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, nil, b[nl+1:], b[:nl+1])
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %s does not open with codec key %q: %w", key, id, err)
	}
	return plain, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}
