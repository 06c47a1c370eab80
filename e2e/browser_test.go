package e2e

// The deck in a real browser: headless Chromium (Debian's chromium, driven over the DevTools
// protocol by chromedp) on a phone-sized screen, against the deck over the suite's real
// server, worker and testagent. It signs in with the link `starter web` prints, answers a
// permission from its card, steers from the box (a stale token first), cancels, and checks
// the layout at phone and desktop widths. TACP_WRITE_SCREENSHOT=1 writes the phone
// screenshot to docs/deck-phone.png for the README.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/deck"
	"github.com/tacp-dev/tacp/signals"
	"github.com/tacp-dev/tacp/tacpclient"
	"github.com/tacp-dev/tacp/worker/tacpworker"
)

const chromiumPath = "/usr/bin/chromium"

// css selects the first element matching a CSS selector.
type css = chromedp.CSS

// browser starts a fresh headless Chromium for t. Without the background-networking flags
// Chromium keeps calling home, which this closed network answers with nothing but delays.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("TACP_REQUIRE_BROWSER") == "1" {
			t.Fatalf("TACP_REQUIRE_BROWSER=1 but %s is missing: apt-get install -y chromium", chromiumPath)
		}
		t.Skipf("%s is missing (apt-get install -y chromium; TACP_REQUIRE_BROWSER=1 makes this a failure)", chromiumPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	// The defaults carry headless, no-first-run, disable-background-networking, disable-sync
	// and the rest of Puppeteer's quiet set; the rest is what this machine needs.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(390, 844),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(bctx)) // starts the browser and opens the tab

	// The page's console and uncaught exceptions, shown when the test fails.
	var mu sync.Mutex
	var console []string
	go func() {
		for m, err := range chromedp.Console(bctx) {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("browser console:\n%s", strings.Join(console, "\n"))
		}
	})
	return bctx
}

// textOf reads the text of the element sel.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

// waitText waits until the text of sel contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := `(() => { const el = document.querySelector(` + jsString(sel) + `); return !!el && el.textContent.includes(` + jsString(want) + `); })()`
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "waiting for %q in %s", want, sel)
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// noOverflow asserts the page is no wider than the screen: nothing to scroll sideways.
func noOverflow(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	require.NoError(t, err)
	require.True(t, ok, "%s: the page scrolls sideways", what)
}

func TestBrowserDeckOnAPhone(t *testing.T) {
	d := newTestDeck(t)
	ctx := browser(t) // after the deck: the browser closes first, ending its streams

	// A turn waits for a person to allow an edit.
	ask := session(t)
	prompt(t, signals.SessionConfig{SessionID: ask}, "/permission edit")
	permissionRequested(t, ask)

	// Sign in with the printed link; the token leaves the address bar at once.
	rowSel := `#sessions a[data-session="` + ask + `"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL+"/#token="+d.operator),
		chromedp.WaitVisible(css(rowSel)),
	))
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.NotContains(t, href, d.operator)
	require.Equal(t, signals.RoleController, textOf(t, ctx, "#who"))
	// The list puts it among those that need approval (visibility may take a refresh).
	waitText(t, ctx, rowSel, "needs approval")
	noOverflow(t, ctx, "sessions list at 390px")

	// Open it: the card offers the agent's options and counts down to the deadline.
	allow := `#pending .perm button[data-option="allow"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(rowSel)),
		chromedp.WaitVisible(css(allow)),
	))
	card := textOf(t, ctx, "#pending .perm")
	require.Contains(t, card, "edit something")
	require.Contains(t, card, "Always allow")
	require.Contains(t, card, "Reject")
	waitText(t, ctx, "#pending .countdown", "answer within 9:")
	waitText(t, ctx, "#transcript", "permission asked: edit something")
	noOverflow(t, ctx, "session view at 390px")

	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	require.Equal(t, 780, img.Bounds().Dx(), "390 CSS px at 2x")
	if os.Getenv("TACP_WRITE_SCREENSHOT") == "1" {
		out := filepath.Join("..", "docs", "deck-phone.png")
		require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
		require.NoError(t, os.WriteFile(out, shot, 0o644))
		t.Logf("wrote %s", out)
	}

	// Tap allow: the card goes and the turn finishes with the agent told "allow".
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(allow)),
		chromedp.WaitVisible(css(`#transcript .turn-end[data-turn="1"]`)),
		chromedp.WaitNotPresent(css(`#pending .perm`)),
	))
	waitText(t, ctx, "#transcript", "permission selected allow by deck:controller token")
	waitText(t, ctx, "#transcript", "permission: selected allow")
	waitText(t, ctx, `#transcript .turn-end[data-turn="1"]`, "turn 1 ended: end_turn")
	// Events are told in words: no raw event name such as [agent.settings].
	waitText(t, ctx, "#transcript", "the agent is ready")
	require.NotRegexp(t, `\[[a-z_.]+\]`, textOf(t, ctx, "#transcript"))

	// Steer a running turn from the box. A view whose token went stale is told so and
	// refreshed; the second tap then lands and the agent takes the steer inside the turn.
	openRunningTurn(t, ctx, "go left")
	require.NoError(t, chromedp.Do(ctx,
		// As if another viewer steered first: the page still holds the old token "0".
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#composer').dataset.token = '0'; document.querySelector('#steer-btn').click()`),
		chromedp.WaitVisible(css(`#composer-note.warn`)),
	))
	note := textOf(t, ctx, "#composer-note")
	require.Contains(t, note, "Stale")
	require.Contains(t, note, "Refreshed")
	token, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`#composer`), "data-token"))
	require.NoError(t, err)
	kept, err := chromedp.Run(ctx, chromedp.Value(css(`#composer-text`)))
	require.NoError(t, err)
	require.Equal(t, "1", token.Value, "the refresh brought the live token")
	require.Equal(t, "go left", kept, "the text waits to be sent again")

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#steer-btn`))))
	waitText(t, ctx, "#composer-note", "Steer accepted")
	waitText(t, ctx, "#transcript .ev.steer", "go left")
	waitText(t, ctx, "#transcript", "steered: go left")
	waitText(t, ctx, "#transcript", "delivered (injected)")

	// Cancel from the page ends the turn cancelled.
	tapCancel(t, ctx)
	waitText(t, ctx, `#transcript .turn-end[data-turn="1"]`, "cancelled")
	// The steer's "Steering turn 1.1" goes with the turn it was about.
	waitText(t, ctx, "#composer-note", "No turn is running")

	// The same page on a desktop: nothing overflows and the controls are at hand.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.WaitVisible(css(`#composer-text`)),
	))
	noOverflow(t, ctx, "session view at 1280px")
}

// perfProbe records the page's longest main-thread task (PerformanceObserver "longtask");
// __perf.reset() starts a new measurement.
const perfProbe = `window.__perf = { longest: 0, tasks: 0, reset() { this.longest = 0; this.tasks = 0; } };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) { __perf.tasks++; __perf.longest = Math.max(__perf.longest, e.duration); }
}).observe({ type: 'longtask' });`

// longestTask reads the longest main-thread task since the last __perf.reset(), in ms; 0
// when no task took 50 ms, the browser's threshold of a long task.
func longestTask(t *testing.T, ctx context.Context) float64 {
	t.Helper()
	ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`__perf.longest`))
	require.NoError(t, err)
	return ms
}

// openSession shows session id in the signed-in page and waits, in the page, until sel is
// there; it returns how long that took, measured by the page's clock.
func openSession(t *testing.T, ctx context.Context, id, sel string) time.Duration {
	t.Helper()
	js := `new Promise((done) => {
  const t0 = performance.now();
  location.hash = '#/s/' + encodeURIComponent(` + jsString(id) + `);
  const check = () => document.querySelector(` + jsString(sel) + `) ? done(performance.now() - t0) : setTimeout(check, 10);
  check();
})`
	ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	return time.Duration(ms * float64(time.Millisecond))
}

// TestBrowserLongTurnStaysResponsive streams a turn of 2,000 chunks into an open page and
// reopens it: the page keeps up with the journal, no task blocks it for long, and a Cancel
// tapped while a long turn streams ends that turn. It logs the figures the issue quotes
// (longest task, time from the journal's turn end to the page showing it, reopen time).
func TestBrowserLongTurnStaysResponsive(t *testing.T) {
	d := newTestDeck(t)
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL+"/#token="+d.operator),
		chromedp.WaitVisible(css(`#sessions`)),
		chromedp.Evaluate[chromedp.Void](perfProbe+`; undefined`),
	))

	// Live: the page is open on the session while its 2,000 chunks stream in.
	long := session(t)
	prompt(t, signals.SessionConfig{SessionID: long}, "/chunks 2000 every 1ms")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`__perf.reset(); location.hash = '#/s/' + encodeURIComponent(`+jsString(long)+`); undefined`),
		chromedp.WaitVisible(css(`#composer`)),
	))
	evs := turnEnd(t, long, 1)
	ended := time.Now()
	end := `#transcript .turn-end[data-turn="1"]`
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector(`+jsString(end)+`)`, chromedp.WithPollingTimeout(120*time.Second)))
	require.NoError(t, err, "the page never showed the turn's end")
	showEnd := time.Since(ended)
	liveLongest := longestTask(t, ctx)
	waitText(t, ctx, "#transcript", "chunk 2000\n")

	// Reopened: the whole journal replays into a fresh view.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/'; undefined`),
		chromedp.WaitVisible(css(`#sessions`)),
		chromedp.Evaluate[chromedp.Void](`__perf.reset()`),
	))
	reopen := openSession(t, ctx, long, end)
	openLongest := longestTask(t, ctx)
	waitText(t, ctx, "#transcript", "chunk 2000\n")
	t.Logf("2,000-chunk turn (%d journal events): longest task live %.0f ms, page showed the end %v after the journal; reopen %v, longest task %.0f ms",
		len(evs), liveLongest, showEnd.Round(time.Millisecond), reopen.Round(time.Millisecond), openLongest)

	// Cancel while a long turn streams: the tap is handled and the turn ends cancelled.
	busy := session(t)
	prompt(t, signals.SessionConfig{SessionID: busy}, "/chunks 30000 every 1ms")
	waitRunning(t, busy, 1)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`__perf.reset(); location.hash = '#/s/' + encodeURIComponent(`+jsString(busy)+`); undefined`),
		chromedp.WaitVisible(css(`#composer[data-state="running"]`)),
	))
	waitText(t, ctx, "#transcript", "chunk 500\n")
	tapped := time.Now()
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#cancel-btn`))))
	endedWith(t, busy, 1, "cancelled")
	waitText(t, ctx, `#transcript .turn-end[data-turn="1"]`, "cancelled")
	cancelShown := time.Since(tapped)
	streamLongest := longestTask(t, ctx)
	t.Logf("cancel during a long turn: the page showed the cancelled end %v after the tap; longest task %.0f ms",
		cancelShown.Round(time.Millisecond), streamLongest)

	// A session of many turns opens on its newest; older turns come back on demand.
	many := session(t)
	for i := 1; i <= 5; i++ {
		prompt(t, signals.SessionConfig{SessionID: many}, fmt.Sprintf("turn number %d", i))
		turnEnd(t, many, int64(i))
	}
	openSession(t, ctx, many, `#transcript .turn-end[data-turn="5"]`)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(`#show-earlier`))))
	require.Equal(t, "Show 2 earlier turns", textOf(t, ctx, "#show-earlier"), "turns 3 to 5 are in the page")
	require.NotContains(t, textOf(t, ctx, "#transcript"), "turn number 2")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`#show-earlier`)),
		chromedp.WaitNotVisible(css(`#show-earlier`)),
	))
	waitText(t, ctx, "#transcript", "turn number 1")
	waitText(t, ctx, "#transcript", "session started")

	// The figures are logged, not asserted (speed is the benchmarks' to measure): what fails
	// a page that lays out its transcript per chunk is the conditions above, the cancelled
	// end that it never shows within the wait, and the window of turns it does not have.
}

// TestBrowserDeepLinkSurvivesSignIn opens a notification's link to a session's request while
// signed out: after the sign-in form, the page is on that session with the named card in
// view and in focus.
func TestBrowserDeepLinkSurvivesSignIn(t *testing.T) {
	d := newTestDeck(t)
	ctx := browser(t)
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/permission edit")
	req := permissionRequested(t, id).RequestID

	// A signed-out page asks the deck nothing it would refuse (the console shows no 401).
	var mu sync.Mutex
	var refused []string
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && e.Response.Status == 401 {
			mu.Lock()
			refused = append(refused, e.Response.URL)
			mu.Unlock()
		}
	}))
	_, err := chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{})
		return err
	}))
	require.NoError(t, err)
	link := "/#/s/" + id + "/" + req
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL+link),
		chromedp.WaitVisible(css(`#token`)),
	))
	mu.Lock()
	require.Empty(t, refused, "the signed-out page was refused")
	mu.Unlock()
	require.Contains(t, textOf(t, ctx, "#login-target"), id)
	card := `#pending .perm.target[data-request="` + req + `"]`
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(wait,
		chromedp.SendKeys(css(`#token`), d.operator),
		chromedp.Click(css(`#login button[type="submit"]`)),
		chromedp.WaitVisible(css(card)),
	))
	hash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	require.NoError(t, err)
	require.Equal(t, "#/s/"+id+"/"+req, hash)
	landed, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
  const c = document.querySelector(`+jsString(card)+`);
  const r = c.getBoundingClientRect();
  return document.activeElement === c && r.top >= 0 && r.bottom <= window.innerHeight;
})()`))
	require.NoError(t, err)
	require.True(t, landed, "the card is in view and has the focus")
}

// newNamedDeck is a deck whose one controller token names a person (--token NAME=SECRET);
// d.operator is the secret.
func newNamedDeck(t *testing.T, name string) *testDeck {
	t.Helper()
	secret := "s-" + signals.NewID()
	h, err := deck.New(deck.Options{Client: sc, ControllerTokens: []string{name + "=" + secret}, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	d := &testDeck{Server: httptest.NewServer(h), operator: secret}
	t.Cleanup(func() { d.CloseClientConnections(); d.Close() })
	return d
}

// TestBrowserShowsPeopleNotRoles signs in with a token that names alice: the header says
// alice, and her answer to a permission reads "by deck:alice" in the transcript, as the
// journal records it.
func TestBrowserShowsPeopleNotRoles(t *testing.T) {
	d := newNamedDeck(t, "alice")
	ctx := browser(t)
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id}, "/permission edit")
	permissionRequested(t, id)

	allow := `#pending .perm button[data-option="allow"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL+"/#token="+d.operator),
		chromedp.WaitVisible(css(`#sessions`)),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
		chromedp.WaitVisible(css(allow)),
	))
	require.Equal(t, "alice · controller", textOf(t, ctx, "#who"))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(allow))))
	evs := endedWith(t, id, 1, "end_turn")
	require.Contains(t, journalDump(evs), `"answered_by":"deck:alice"`)
	waitText(t, ctx, "#transcript", "permission selected allow by deck:alice")

	// Her steer and her cancel name her too, in the journal and on the page.
	running := openRunningTurn(t, ctx, "go left")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`#steer-btn`))))
	waitText(t, ctx, "#transcript .ev.steer", "by deck:alice")
	tapCancel(t, ctx)
	waitText(t, ctx, "#transcript", "cancelling turn 1: cancel by deck:alice")
	evs = endedWith(t, running, 1, "cancelled")
	dump := journalDump(evs)
	require.Contains(t, dump, `"by":"deck:alice"`)
	for _, kind := range []string{signals.EventSteerAccepted, signals.EventTurnCancelling} {
		var by []string
		for _, ev := range evs {
			if ev.Kind == kind {
				var d struct{ By string }
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				by = append(by, d.By)
			}
		}
		require.Equal(t, []string{"deck:alice"}, by, kind)
	}

	// She rewinds to the end of turn 1: the page opens the new session, hers.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`details.settings summary`)),
		chromedp.WaitVisible(css(`#rewind-turn`)),
		chromedp.SendKeys(css(`#rewind-turn`), "1"),
		chromedp.Click(css(`#rewind-btn`)),
	))
	waitText(t, ctx, "#toast", "Rewound to turn 1 as ")
	waitText(t, ctx, "#app h1", "fork-")
	fork := strings.TrimSpace(textOf(t, ctx, "#app h1"))
	acc, err := sc.Access(ctxFor(t, 10*time.Second), fork)
	require.NoError(t, err)
	require.Equal(t, "alice", acc.Owner)
}

// openRunningTurn starts a session whose first turn sleeps, opens it on the page and types
// text into the composer, ready to be steered; it returns the session's id.
func openRunningTurn(t *testing.T, ctx context.Context, text string) string {
	t.Helper()
	id := session(t)
	prompt(t, signals.SessionConfig{SessionID: id, Agent: profileSteering}, "/sleep 60s")
	waitRunning(t, id, 1)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
		chromedp.WaitVisible(css(`#composer[data-state="running"]`)),
		chromedp.SendKeys(css(`#composer-text`), text),
	))
	return id
}

// openOnAPhone signs in to the deck at deckURL with token on a 390 px phone and opens
// session id.
func openOnAPhone(deckURL, token, id string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(deckURL + "/#token=" + token),
		chromedp.WaitVisible(css(`#sessions`)),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(` + jsString(id) + `); undefined`),
	}
}

// tapCancel taps Cancel on the open session and waits for the page to say the deck took it.
// The dock stands at the bottom of the screen however short the transcript is: were it to
// follow the transcript, each streamed line would move the button, and a tap aimed a moment
// before would land beside it (a person's thumb as much as chromedp's click).
func tapCancel(t *testing.T, ctx context.Context) {
	t.Helper()
	gap, err := chromedp.Run(ctx, chromedp.Evaluate[float64](
		`innerHeight - document.querySelector('#cancel-btn').getBoundingClientRect().bottom`))
	require.NoError(t, err)
	require.Less(t, gap, 64.0, "the cancel button stands %.0f px above the bottom of the screen", gap)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById('toast').textContent = ''`),
		chromedp.Click(css(`#cancel-btn`)),
	))
	waitText(t, ctx, "#toast", "Cancelling the turn")
}

// auditJS lists what fails the deck's readability rules in the page as it is: text on a
// control or badge under 4.5:1 against its background (WCAG AA, from computed styles) and a
// tap target under 44×44 CSS px. Disabled and hidden controls are left out.
const auditJS = `(() => {
  const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = (c) => c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const bg = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const name = (el) => (el.id ? '#' + el.id : el.tagName.toLowerCase() + '.' + el.className) + ' "' + el.textContent.trim().slice(0, 24) + '"';
  const fails = [];
  for (const el of document.querySelectorAll('button, .btn, .badge, a, summary')) {
    if (el.disabled || !el.getClientRects().length) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) fails.push(name(el) + ' contrast ' + ratio.toFixed(2) + ':1');
  }
  for (const el of document.querySelectorAll('button, .btn, .brand, summary, .sessions a')) {
    if (el.disabled || !el.getClientRects().length) continue;
    const r = el.getBoundingClientRect();
    if (r.width < 44 || r.height < 44) fails.push(name(el) + ' target ' + Math.round(r.width) + '×' + Math.round(r.height));
  }
  return fails;
})()`

// axeJS runs axe-core's contrast and target-size rules (WCAG 2.2 AA) on the page as it is
// and lists each violation with the element it found it on.
const axeJS = `axe.run(document, { runOnly: { type: 'rule', values: ['color-contrast', 'target-size'] }, resultTypes: ['violations'] })
  .then((r) => r.violations.flatMap((v) => v.nodes.map((n) => v.id + ' ' + n.target.join(' ') + ': ' + (n.failureSummary || '').replace(/\s+/g, ' '))))`

// colorScheme makes the page's prefers-color-scheme light or dark.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// TestBrowserReadableAndTouchable audits the sessions list (with a "needs approval" and a
// "suspended" badge) and a session with a permission card and a question in the light and
// the dark theme: every control's text is at least 4.5:1 against its background and every
// tap target at least 44 px, and axe-core finds no contrast or target-size violation in any
// text. A question's javascript: URL is text, not a link.
func TestBrowserReadableAndTouchable(t *testing.T) {
	d := newTestDeck(t)
	ctx := browser(t)
	id := session(t)
	// Sent by a named person: the page shows who under the prompt.
	_, err := sc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id}, signals.PromptRequest{Text: "/permission edit", ClientMessageID: signals.NewID(), By: "deck:alice"})
	require.NoError(t, err)
	permissionRequested(t, id)
	asks := session(t)
	prompt(t, signals.SessionConfig{SessionID: asks}, "/elicit-url javascript:alert(1)")
	elicited(t, asks, 1)

	// within bounds one step, so that a broken page fails in a minute, not at the
	// browser's deadline.
	within := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 60*time.Second)
		t.Cleanup(cancel)
		return c
	}
	require.NoError(t, chromedp.Do(within(),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL+"/#token="+d.operator),
		chromedp.WaitVisible(css(`#sessions a[data-session="`+id+`"] .badge.ask`)),
	))
	axe, err := os.ReadFile(requirePeer(t, "axe-core/axe.min.js"))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](string(axe)+"\n;undefined"))
	require.NoError(t, err)
	audit := func(where string) {
		t.Helper()
		fails, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](auditJS))
		require.NoError(t, err)
		assert.Empty(t, fails, where) // every view and theme is audited, then the test fails
		violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](axeJS, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		assert.Empty(t, violations, "axe-core, %s", where)
	}
	for _, scheme := range []string{"light", "dark"} {
		require.NoError(t, chromedp.Do(within(),
			colorScheme(scheme),
			chromedp.Evaluate[chromedp.Void](`location.hash = '#/'; undefined`),
			chromedp.WaitVisible(css(`#sessions a[data-session="`+id+`"] .badge.ask`)),
			// A suspended session's badge, as the list draws it.
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#sessions .badges').append(Object.assign(document.createElement('span'), {className: 'badge suspended', textContent: 'suspended'})); undefined`),
		))
		dark, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`matchMedia('(prefers-color-scheme: dark)').matches`))
		require.NoError(t, err)
		require.Equal(t, scheme == "dark", dark)
		audit(scheme + ": sessions list")

		require.NoError(t, chromedp.Do(within(),
			chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
			chromedp.WaitVisible(css(`#pending .perm button[data-option="allow"]`)),
			chromedp.WaitVisible(css(`#composer[data-state]`)),
		))
		waitText(t, ctx, "#transcript .ev.user .by", "by deck:alice")
		audit(scheme + ": a session with a permission card")

		require.NoError(t, chromedp.Do(within(),
			chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(asks)+`); undefined`),
			chromedp.WaitVisible(css(`#pending .question`)),
		))
		audit(scheme + ": a session with a question")
		links, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#pending a').length`))
		require.NoError(t, err)
		require.Zero(t, links, "a javascript: URL is no link")
		require.Contains(t, textOf(t, ctx, "#pending .question"), "javascript:alert(1)")
	}
}

// hideJS makes the page hidden, as opening another tab in front of it does.
const hideJS = `Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
document.dispatchEvent(new Event('visibilitychange')); undefined`

// showJS makes it visible again.
const showJS = `Object.defineProperty(document, 'hidden', { configurable: true, get: () => false });
Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
document.dispatchEvent(new Event('visibilitychange')); undefined`

// TestBrowserEightTabsOnOneDeck: a browser gives one host six HTTP/1.1 connections, and an
// open session's page holds a stream, so a seventh tab stayed blank. A hidden tab lets its
// stream go: eight tabs open one after another, each hidden once it is live (as the next
// one in front of it hides it), and every one of them shows its session live; the first,
// shown again, streams on from where it was.
func TestBrowserEightTabsOnOneDeck(t *testing.T) {
	d := newTestDeck(t)
	bctx := browser(t)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	turnEnd(t, id, prompt(t, cfg, "/chunks 1").TurnID)

	var tabs []context.Context
	for i := range 8 {
		tctx := bctx
		if i > 0 {
			var cancel context.CancelFunc
			tctx, cancel = chromedp.NewContext(bctx)
			t.Cleanup(cancel)
			// The tab opens on the first run: on tctx, so that the bounded context of its
			// load below does not close it when it ends.
			require.NoError(t, chromedp.Do(tctx))
		}
		lctx, cancel := context.WithTimeout(tctx, 60*time.Second)
		err := chromedp.Do(lctx,
			chromedp.Navigate(d.URL+"/#token="+d.operator),
			chromedp.WaitVisible(css(`#sessions`)),
			chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
			chromedp.WaitVisible(css(`#live.on`)),
		)
		cancel()
		require.NoError(t, err, "tab %d shows the session live", i+1)
		if i < 7 {
			require.NoError(t, chromedp.Do(tctx, chromedp.Evaluate[chromedp.Void](hideJS)), "tab %d hidden", i+1)
			waitText(t, tctx, "#live", "paused")
		}
		tabs = append(tabs, tctx)
	}

	require.NoError(t, chromedp.Do(tabs[0], chromedp.Evaluate[chromedp.Void](showJS)))
	turnEnd(t, id, prompt(t, cfg, "/chunks 2").TurnID)
	waitText(t, tabs[0], "#transcript", "chunk 2")
	waitText(t, tabs[0], "#live", "live")
}

// TestBrowserDenyAnswerObserveAndHostileText covers what a person does besides approving:
// denies a permission from its card, answers a question from its form, and, signed in as an
// observer in another browser, sees the cards without the power to answer them. Text that
// looks like HTML, in a prompt, an agent's reply and a question, stays text: nothing of it
// runs or becomes an element.
func TestBrowserDenyAnswerObserveAndHostileText(t *testing.T) {
	d := newTestDeck(t)
	ctx := browser(t)
	id := session(t)
	cfg := signals.SessionConfig{SessionID: id}
	hostile := `<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>`
	turnEnd(t, id, prompt(t, cfg, "/echo\n"+hostile).TurnID)

	reject := `#pending .perm button[data-option="reject"]`
	prompt(t, cfg, "/permission edit")
	permissionRequestedIn(t, id, 2)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(d.URL+"/#token="+d.operator),
		chromedp.WaitVisible(css(`#sessions`)),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
		chromedp.WaitVisible(css(reject)),
	))
	inert := func(what string) {
		t.Helper()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__pwned === undefined && !document.querySelector('#transcript img, #transcript script, #pending img, #pending script')`))
		require.NoError(t, err)
		require.True(t, ok, "%s: hostile text became markup", what)
	}
	waitText(t, ctx, "#transcript", hostile) // the prompt and the agent's echo, as text
	inert("prompt and reply")

	// Deny: the turn goes on with the agent told so, and the page says who denied.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(reject))))
	evs := endedWith(t, id, 2, "end_turn")
	require.Contains(t, journalDump(evs), `"option_id":"reject"`)
	waitText(t, ctx, "#transcript", "permission selected reject by deck:controller token")
	waitText(t, ctx, `#transcript .turn-end[data-turn="2"]`, "turn 2 ended")

	// A question whose words look like markup; answered from its form.
	prompt(t, cfg, "/elicit-form Which way? "+hostile)
	question := `#pending .question[data-request]`
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(css(question))))
	waitText(t, ctx, question+" .title", "Which way? "+hostile)
	inert("question")

	// An observer, in a browser of its own, sees the same card and cannot answer it.
	obs := browser(t)
	require.NoError(t, chromedp.Do(obs, append(openOnAPhone(d.URL, d.observer, id), chromedp.WaitVisible(css(question)))...))
	require.Equal(t, signals.RoleObserver, textOf(t, obs, "#who"))
	waitText(t, obs, question, "Observers cannot answer.")
	enabled, err := chromedp.Run(obs, chromedp.Evaluate[string](`[...document.querySelectorAll("#pending button, #composer button")].filter((b) => !b.disabled && b.getClientRects().length).map((b) => b.id + ":" + b.textContent).join(", ")`))
	require.NoError(t, err)
	require.Empty(t, enabled, "an observer's page offers no control")
	// Even a control forced open is refused by the deck, and the page says so.
	_, err = chromedp.Run(obs, chromedp.Evaluate[chromedp.Void](`(() => { const b = document.querySelector('#pending .question button.reject'); b.disabled = false; b.click(); })()`))
	require.NoError(t, err)
	waitText(t, obs, "#toast", "forbidden: an observer token can only read")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(css(question+` input`), "left"),
		chromedp.Click(css(question+` button[type="submit"]`)),
	))
	evs = endedWith(t, id, 3, "end_turn")
	require.Contains(t, agentTexts(t, evs, 3), "form elicitation: accept: left")
	waitText(t, ctx, "#transcript", "question accept by deck:controller token")
	waitText(t, obs, "#transcript", "question accept by deck:controller token")
	inert("after the answers")
}

// TestBrowserDeckRestartedMidStream restarts the deck while a page streams a turn: the page
// reconnects on its own, reads on from the last event it had, and shows the turn's reply
// exactly as the journal holds it, no chunk doubled or missing.
func TestBrowserDeckRestartedMidStream(t *testing.T) {
	token := "op-" + signals.NewID()
	serve := func(l net.Listener) *http.Server {
		h, err := deck.New(deck.Options{Client: sc, ControllerTokens: []string{token}, PollInterval: 50 * time.Millisecond})
		require.NoError(t, err)
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		return srv
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	first := serve(l)
	t.Cleanup(func() { _ = first.Close() })
	ctx := browser(t)

	id := session(t)
	turn := prompt(t, signals.SessionConfig{SessionID: id}, "/chunks 300 every 20ms").TurnID
	out := `#transcript .agent-out[data-turn="` + strconv.FormatInt(turn, 10) + `"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate("http://"+addr+"/#token="+token),
		chromedp.WaitVisible(css(`#sessions`)),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/' + encodeURIComponent(`+jsString(id)+`); undefined`),
	))
	waitText(t, ctx, out, "chunk 20\n")

	// The deck goes, every stream with it, and comes back on its address while the turn runs.
	require.NoError(t, first.Close())
	l, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	second := serve(l)
	t.Cleanup(func() { _ = second.Close() })
	evs := turnEnd(t, id, turn)
	want := strings.Join(agentTexts(t, evs, turn), "")
	require.Contains(t, want, "chunk 300\n")
	waitText(t, ctx, `#transcript .turn-end[data-turn="`+strconv.FormatInt(turn, 10)+`"]`, "ended")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll(`+jsString(out)+`)].map((el) => el.textContent).join('')`))
	require.NoError(t, err)
	require.Equal(t, want, got, "the page shows the journal's reply, no chunk doubled or missing")
}

// Each turn's changes to the workspace stand in the transcript, counted; opened, the diff
// itself, read by the deck from the workers' checkpoint store.
func TestBrowserShowsWhatATurnChanged(t *testing.T) {
	queue := "tacp-deckdiff-" + signals.NewID()[:8]
	data := t.TempDir()
	store := checkpoint.DefaultStoreURL(data)
	extraWorker(t, tc, tacpworker.Options{TaskQueue: queue, DataDir: data, CheckpointStore: store})
	qc := tacpclient.NewClient(tc, queue)
	id := session(t)
	res, err := qc.Prompt(ctxFor(t, 30*time.Second), signals.SessionConfig{SessionID: id, Policy: signals.PolicyAllowAll},
		signals.PromptRequest{Text: "/sh printf 'hello from turn one\\n' > notes.txt", ClientMessageID: signals.NewID()})
	require.NoError(t, err)
	endedWith(t, id, res.TurnID, "end_turn")

	secret := "s-" + signals.NewID()
	h, err := deck.New(deck.Options{Client: sc, ControllerTokens: []string{secret}, PollInterval: 50 * time.Millisecond, Checkpoints: checkpoint.Reader{URL: store}})
	require.NoError(t, err)
	d := &testDeck{Server: httptest.NewServer(h), operator: secret}
	t.Cleanup(func() { d.CloseClientConnections(); d.Close() })
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, openOnAPhone(d.URL, d.operator, id)...))
	card := `#transcript details.changes[data-turn="1"]`
	waitText(t, ctx, card+" summary", "files: 1 changed, +1 −0")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(card+" summary"))))
	waitText(t, ctx, card+" pre", "+hello from turn one")
	waitText(t, ctx, card+" pre", "notes.txt")
	noOverflow(t, ctx, "a diff opened at 390px")

	// A turn with no checkpoint, and a deck that reads no store, say so.
	r := d.call(t, "GET", sessPath(id, "/diff")+"?turn=9", d.operator, nil)
	require.Equal(t, http.StatusNotFound, r.Code, string(r.Body))
	require.Equal(t, "no_checkpoint", r.errType(t))
	plain := newTestDeck(t)
	r = plain.call(t, "GET", sessPath(id, "/diff"), plain.operator, nil)
	require.Equal(t, http.StatusNotFound, r.Code, string(r.Body))
	require.Equal(t, "no_checkpoint", r.errType(t))
}
