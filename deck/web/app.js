// The deck's web app: sign-in, the sessions list and one session's view (the transcript
// replayed from the journal and then live over Server-Sent Events, permission cards,
// the steer/prompt box, cancel, policy and rules). Plain JavaScript, no build step.
// Everything the agent or a person wrote is put in the page as text, never as HTML.
'use strict';

(() => {
  const app = document.getElementById('app');
  const enc = encodeURIComponent;
  let role = null; // "controller" | "observer" once signed in
  let view = null; // the current view: {stop()}

  // ---- small helpers -------------------------------------------------------------------

  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'data') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of kids.flat()) {
      if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  // byLine names who sent a prompt or a steer, as the journal records it (its `by`).
  const byLine = (by) => (by ? h('div', { class: 'by', text: 'by ' + by }) : null);

  class APIError extends Error {
    constructor(status, body) {
      super((body && body.message) || `HTTP ${status}`);
      this.status = status;
      this.type = (body && body.type) || 'http_' + status;
      this.details = body && body.details;
    }
  }

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: {} };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, { type: 'network', message: 'The deck is not reachable: ' + e.message });
    }
    let data = null;
    try { data = await res.json(); } catch (e) { /* an empty or non-JSON body */ }
    if (!res.ok) {
      const err = new APIError(res.status, data);
      if (res.status === 401 && role) signedOut('Your sign-in ended: enter the token again.');
      throw err;
    }
    return data;
  }

  // newId makes client_message_id / client_msg_id values; getRandomValues works on plain
  // http too (a phone on the LAN), where crypto.randomUUID does not.
  function newId() {
    const b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  let toastTimer = 0;
  function toast(msg, bad) {
    const t = document.getElementById('toast');
    t.textContent = msg;
    t.className = bad ? 'bad' : '';
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, bad ? 6000 : 3500);
  }

  function setLive(state) {
    const l = document.getElementById('live');
    if (!state) { l.hidden = true; return; }
    l.hidden = false;
    l.className = 'live ' + (state === 'live' ? 'on' : 'off');
    l.textContent = state === 'live' ? 'live' : state;
  }

  // webURL is u when it is an http or https URL, the only ones the page makes links of;
  // anything else (javascript:, data:, a relative path) stays text.
  function webURL(u) {
    try {
      const url = new URL(u);
      return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : '';
    } catch (e) {
      return '';
    }
  }

  // words turns an event or update name into words: "agent.context_lost" → "agent context lost".
  function words(name) { return String(name).replace(/[._]+/g, ' ').trim(); }

  function badge(text, cls) { return h('span', { class: 'badge ' + (cls || '') }, text); }

  // agentName is a session's agent profile (older sessions named a command line: its program).
  function agentName(agent) {
    if (!agent) return '';
    const first = agent.trim().split(/\s+/)[0];
    return first.slice(first.lastIndexOf('/') + 1);
  }

  function isLive(state) { return ['running', 'grace', 'suspended', 'cancelling'].includes(state); }

  // ---- sign-in ---------------------------------------------------------------------------

  // remembered says whether this browser holds the deck's cookie, which the page cannot read
  // (HttpOnly): a signed-out page then asks nothing, where asking would log a 401.
  function remembered(v) {
    try {
      if (v === true) localStorage.setItem('tacp.deck.signed-in', '1');
      else if (v === false) localStorage.removeItem('tacp.deck.signed-in');
      return localStorage.getItem('tacp.deck.signed-in') === '1';
    } catch (e) {
      return true; // no storage: ask, as before
    }
  }

  function signedOut(msg) {
    role = null;
    remembered(false);
    document.getElementById('who').textContent = '';
    document.getElementById('logout').hidden = true;
    route(msg);
  }

  // signedIn takes whoami's answer: the header names the person (the token's name) and
  // their role, or the role alone for an unnamed token.
  function signedIn(me) {
    role = me.role;
    remembered(true);
    const who = document.getElementById('who');
    who.textContent = me.name ? `${me.name} · ${me.role}` : me.role;
    who.title = `Your answers are recorded as ${me.by || role}`;
    document.getElementById('logout').hidden = false;
  }

  function loginView(msg) {
    const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'current-password', required: true, placeholder: 'token' });
    const err = h('p', { class: 'error', id: 'login-error', text: msg || '' });
    const form = h('form', { class: 'card', id: 'login' },
      h('label', { for: 'token', text: 'Deck token (from `starter web`)' }), input,
      h('button', { class: 'btn primary', type: 'submit', text: 'Sign in' }), err);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        const r = await api('POST', '/api/login', { token: input.value.trim() });
        signedIn(r);
        // A link to a session (a notification's) survives the sign-in it had to wait for.
        if (!sessionLink()) location.hash = '#/';
        route();
      } catch (x) {
        err.textContent = x.status === 401 ? 'That token is not valid here.' : x.message;
      }
    });
    const link = sessionLink();
    app.replaceChildren(h('h1', { text: 'Sign in' }),
      link ? h('p', { class: 'muted pad', id: 'login-target', text: `Sign in to open session ${link.id}.` }) : null, form);
    input.focus();
    return { stop() {} };
  }

  // ---- sessions list ---------------------------------------------------------------------

  function listView() {
    const list = h('ul', { class: 'sessions', id: 'sessions' });
    const status = h('p', { class: 'muted pad', text: 'Loading sessions…' });
    const parts = [h('h1', { text: 'Sessions' })];
    if (role === 'controller') parts.push(newSessionForm());
    parts.push(list, status);
    app.replaceChildren(...parts);
    let timer = 0;
    let stopped = false;

    async function refresh() {
      clearTimeout(timer);
      try {
        const r = await api('GET', '/api/sessions');
        if (stopped) return;
        list.replaceChildren(...r.sessions.map(row));
        status.textContent = r.sessions.length ? `Updated ${new Date().toLocaleTimeString()}` : 'No sessions yet.';
      } catch (e) {
        if (!stopped) status.textContent = 'Could not list sessions: ' + e.message;
      }
      if (!stopped) timer = setTimeout(refresh, 4000);
    }

    function row(s) {
      const badges = [];
      if (s.awaiting_approval && s.running) badges.push(badge('needs approval', 'ask'));
      badges.push(badge(s.state || (s.running ? 'running' : 'closed'), s.state));
      if (s.turn) badges.push(badge('turn ' + s.turn));
      if (s.agent) badges.push(badge(agentName(s.agent)));
      if (s.owner) badges.push(badge(s.owner + "'s"));
      return h('li', {},
        h('a', { href: '#/s/' + enc(s.session_id), data: { session: s.session_id } },
          h('div', { class: 'card' },
            h('div', { class: 'id', text: s.session_id }),
            h('div', { class: 'badges' }, badges),
            h('div', { class: 'muted', text: 'started ' + new Date(s.started_at).toLocaleString() }))));
    }

    const onVisible = () => { if (!document.hidden) refresh(); };
    document.addEventListener('visibilitychange', onVisible);
    refresh();
    return { stop() { stopped = true; clearTimeout(timer); document.removeEventListener('visibilitychange', onVisible); } };
  }

  function newSessionForm() {
    const id = h('input', { type: 'text', id: 'new-id', required: true, pattern: '[A-Za-z0-9._\\-]{1,128}', placeholder: 'session id (letters, digits, . _ -)', autocapitalize: 'off', spellcheck: 'false' });
    const text = h('textarea', { id: 'new-text', required: true, rows: 2, placeholder: 'first prompt' });
    const err = h('p', { class: 'error' });
    const form = h('form', {}, id, text, h('button', { class: 'btn primary', type: 'submit', text: 'Start' }), err);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        await api('POST', `/api/sessions/${enc(id.value)}/prompt`, { text: text.value, client_message_id: newId() });
        location.hash = '#/s/' + enc(id.value);
      } catch (x) {
        err.textContent = x.message;
      }
    });
    return h('details', { class: 'card' }, h('summary', { text: 'New session' }), form);
  }

  // ---- one session -----------------------------------------------------------------------

  const refreshKinds = new Set(['prompt.accepted', 'turn.started', 'turn.restarted', 'agent.context_lost', 'turn.cancelling', 'turn.ended',
    'turn.failed', 'steer.accepted', 'permission.requested', 'permission.resolved', 'permission.forgotten',
    'elicitation.requested', 'elicitation.resolved', 'turn.limited', 'turn.retry_now',
    'policy.changed', 'viewer.grace_started', 'viewer.grace_cancelled', 'session.closed']);
  const quietKinds = new Set(['user_message_chunk', 'available_commands_update', 'current_mode_update',
    'usage_update', 'config_option_update', 'session_info_update']);

  // sessionView shows session id; target names the open request to bring into view (any
  // open one when empty), as a notification's link does.
  function sessionView(id, target) {
    const operator = role === 'controller';
    const stateBadges = h('span', { class: 'badges', id: 'state' });
    const pending = h('section', { class: 'pending', id: 'pending', 'aria-label': 'permission requests' });
    const transcript = h('div', { class: 'transcript', id: 'transcript', role: 'log' });
    const policy = h('select', { id: 'policy', disabled: !operator },
      ['ask_for_risky', 'ask_always', 'allow_all'].map((l) => h('option', { value: l, text: l })));
    const rules = h('ul', { class: 'rules', id: 'rules' });
    const profiles = h('div', { class: 'muted', id: 'profiles' });
    // sandboxLine says what the kernel sandbox of the session's agent profile lets it do
    // (signals.SandboxInfo.Describe).
    const sandboxLine = (st) => {
      const p = (st.profiles || []).find((x) => x.name === st.agent) || (st.profiles || []).find((x) => x.default);
      const sb = p && p.sandbox;
      if (!sb) return 'off';
      let line = `on · network ${sb.network}`;
      if (sb.allow && sb.allow.length) line += ` (${sb.allow.join(', ')})`;
      if (sb.protect && sb.protect.length) line += ` · protected ${sb.protect.join(', ')}`;
      if (sb.state && sb.state.length) line += ` · state per session ${sb.state.join(', ')}`;
      return line;
    };
    // Rewind: the end of a turn as a new session of this person's (a fork with that turn's
    // files); this session stays as it is.
    const rewindTurn = h('input', { type: 'number', id: 'rewind-turn', min: '1', inputmode: 'numeric', class: 'grow', 'aria-label': 'turn to rewind to', disabled: !operator });
    const rewindBtn = h('button', { class: 'btn', id: 'rewind-btn', type: 'button', text: 'Rewind', title: 'A new session from the end of this turn: its conversation and files', disabled: !operator });
    const settings = h('details', { class: 'card settings' },
      h('summary', { text: 'Permissions: policy and remembered rules' }),
      h('label', { for: 'policy', text: 'Policy' }), policy, rules, profiles,
      h('label', { for: 'rewind-turn', text: 'Rewind to the end of turn (a new session; this one stays)' }),
      h('div', { class: 'row' }, rewindTurn, rewindBtn));
    const note = h('div', { class: 'note', id: 'composer-note' });
    const text = h('textarea', { id: 'composer-text', rows: 2, placeholder: 'Steer the running turn, or send a prompt', 'aria-label': 'message' });
    const steerBtn = h('button', { class: 'btn primary', id: 'steer-btn', type: 'button', text: 'Steer' });
    const promptBtn = h('button', { class: 'btn', id: 'prompt-btn', type: 'button', text: 'Prompt' });
    const cancelBtn = h('button', { class: 'btn danger', id: 'cancel-btn', type: 'button', text: 'Cancel turn', title: 'Cancel the running turn' });
    const composer = h('div', { class: 'composer', id: 'composer', hidden: !operator, data: { token: '' } },
      note, text, h('div', { class: 'row' }, steerBtn, promptBtn, cancelBtn));

    // The dock keeps what asks for a person (open permissions, the composer) at the bottom of
    // the screen, where a phone's reader is while the transcript grows.
    app.replaceChildren(
      h('div', { class: 'head' }, h('h1', { text: id }), stateBadges),
      settings, transcript, h('div', { class: 'dock' }, pending, composer));

    let stopped = false;
    let es = null;
    // streamDone: the stream ended for good (the session closed, or it was refused).
    let streamDone = false;
    let lastSeq = 0;
    let skew = 0; // server clock minus ours, for deadlines
    let status = null;
    let refreshTimer = 0;
    let pollTimer = 0;
    let pendingKey = null;

    // -- the transcript --
    // Rendering costs what is new, not what is there. Journal events wait in a queue that is
    // drained once per animation frame: the scroll position is read once at the start of a
    // frame, chunks of one text block join into one append, and the page is scrolled once at
    // the end. The transcript is one group per turn; only the newest `keep` groups are in the
    // page, older ones wait detached (no layout, no paint) until "Show earlier" brings them.
    let block = null; // the agent text or thought block chunks go on appending to
    const tools = new Map();
    const plans = new Map();
    const windowTurns = 3; // turn groups in the page when a session opens
    const frameBudget = 12; // ms of rendering per frame; the rest waits for the next one
    const groups = []; // {turn, el}, oldest first; groups[first:] are in the page
    const groupOf = new Map();
    let first = 0;
    let keep = windowTurns;
    let evTurn = 0; // the turn of the event being rendered (0: the newest group)
    const earlier = h('button', { class: 'btn earlier', id: 'show-earlier', type: 'button', hidden: true, onclick: showEarlier });
    transcript.append(earlier);

    function groupFor(turn) {
      const key = turn > 0 ? turn : (groups.length ? groups[groups.length - 1].turn : 0);
      let g = groupOf.get(key);
      if (!g) {
        g = { turn: key, el: h('div', { class: 'turn-group', data: { group: String(key) } }) };
        groups.push(g);
        groupOf.set(key, g);
        transcript.append(g.el);
        while (groups.length - first > keep) groups[first++].el.remove();
        showEarlierButton();
      }
      return g;
    }
    function showEarlierButton() {
      const n = groups.slice(0, first).filter((g) => g.turn > 0).length;
      earlier.hidden = first === 0;
      earlier.textContent = n ? `Show ${n} earlier turn${n === 1 ? '' : 's'}` : 'Show the start';
    }
    // showEarlier brings up to five older turns back, keeping the reader's place.
    function showEarlier() {
      const n = Math.min(first, 5);
      const before = document.documentElement.scrollHeight;
      const at = groups[first].el;
      for (let i = first - n; i < first; i++) transcript.insertBefore(groups[i].el, at);
      first -= n;
      keep += n;
      showEarlierButton();
      window.scrollBy(0, document.documentElement.scrollHeight - before);
    }

    function nearBottom() {
      return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
    }
    const queue = [];
    let queued = false;
    let fallback = 0;
    function enqueue(ev) {
      queue.push(ev);
      schedule();
    }
    function schedule() {
      if (queued) return;
      queued = true;
      requestAnimationFrame(flush);
      // A hidden tab runs no animation frames: the timer drains the queue there.
      fallback = setTimeout(flush, 250);
    }
    // flush renders what arrived since the last frame, within the frame's budget; a reader
    // at the bottom stays at the bottom, one who scrolled up to read stays where they are.
    function flush() {
      if (!queued || stopped) return;
      queued = false;
      clearTimeout(fallback);
      const stick = nearBottom();
      const t0 = performance.now();
      let i = 0;
      while (i < queue.length && (i % 64 !== 0 || performance.now() - t0 < frameBudget)) render(queue[i++]);
      queue.splice(0, i);
      closeBlock(true);
      if (stick) window.scrollTo(0, document.documentElement.scrollHeight);
      if (queue.length) schedule();
    }
    function add(el) {
      groupFor(evTurn).el.append(el);
      if (!queued) schedule(); // added outside a frame's rendering: follow it at the next
      return el;
    }
    // closeBlock writes the text gathered for the open block; keepOpen lets the next chunks
    // go on appending to it.
    function closeBlock(keepOpen) {
      if (block && block.buf) {
        block.el.append(block.buf);
        block.buf = '';
      }
      if (!keepOpen) block = null;
    }
    function meta(msg, cls, turn) {
      closeBlock();
      return add(h('div', { class: 'ev meta ' + (cls || ''), data: turn ? { turn: String(turn) } : undefined, text: msg }));
    }
    // changes shows a turn's workspace checkpoint: what it changed, counted; opened, the
    // diff itself, read from the checkpoint store once (GET …/diff).
    function changes(t, d) {
      if (d.error) { meta(`the workspace checkpoint of turn ${t} failed: ${d.error}`, 'bad', t); return; }
      closeBlock();
      const skipped = (d.skipped || []).length;
      const pre = h('pre', { class: 'diff-text' });
      const card = h('details', { class: 'ev changes', data: { turn: String(t) } },
        h('summary', { text: `files: ${d.files_changed} changed, +${d.insertions} −${d.deletions}${skipped ? `, ${skipped} skipped (too large or excluded)` : ''}` }), pre);
      card.addEventListener('toggle', async () => {
        if (!card.open || pre.dataset.loaded) return;
        pre.dataset.loaded = '1';
        pre.textContent = 'Loading…';
        try {
          const r = await api('GET', `/api/sessions/${enc(id)}/diff?turn=${d.turn || t}`);
          pre.textContent = (r.diff || '(no changes)') + (r.truncated ? '\n… (the diff goes on: starter diff shows all of it)' : '');
        } catch (e) {
          pre.textContent = `${e.type}: ${e.message}`;
          delete pre.dataset.loaded;
        }
      });
      add(card);
    }
    function chunk(kind, turn, txt) {
      if (!block || block.kind !== kind || block.turn !== turn) {
        closeBlock();
        block = { kind, turn, buf: '', el: add(h('div', { class: 'ev agent-out ' + kind, data: { turn: String(turn) } })) };
      }
      block.buf += txt;
    }
    function contentText(c) {
      if (!c) return '';
      if (typeof c.text === 'string') return c.text;
      return '[' + (c.type || 'content') + ']';
    }

    function toolCard(u, turn) {
      let t = tools.get(u.toolCallId);
      if (!t) {
        closeBlock();
        const title = h('span', { class: 'title' });
        const st = h('span', { class: 'st' });
        const el = add(h('div', { class: 'ev tool agent-out', data: { turn: String(turn), tool: u.toolCallId || '' } }, st, 'tool: ', title));
        t = { el, title, st };
        tools.set(u.toolCallId, t);
      }
      if (u.title) t.title.textContent = u.title + (u.kind ? ` (${u.kind})` : '');
      if (u.status) {
        t.st.textContent = u.status.replace('_', ' ');
        t.el.classList.remove('pending', 'in_progress', 'completed', 'failed');
        t.el.classList.add(u.status);
      }
      closeBlock();
    }

    function plan(u, turn) {
      let el = plans.get(turn);
      if (!el) {
        closeBlock();
        el = add(h('div', { class: 'ev plan agent-out', data: { turn: String(turn) } }));
        plans.set(turn, el);
      }
      el.replaceChildren(h('strong', { text: 'Plan' }),
        h('ol', {}, (u.entries || []).map((e) => h('li', { class: e.status || '', text: e.content || '' }))));
      closeBlock();
    }

    function agentUpdate(ev) {
      const u = (ev.data && ev.data.update) || {};
      const k = u.sessionUpdate;
      switch (k) {
        case 'agent_message_chunk': chunk('agent', ev.turn_id, contentText(u.content)); break;
        case 'agent_thought_chunk': chunk('thought', ev.turn_id, contentText(u.content)); break;
        case 'tool_call': case 'tool_call_update': toolCard(u, ev.turn_id); break;
        case 'plan': plan(u, ev.turn_id); break;
        default:
          if (!quietKinds.has(k)) meta(`the agent sent an update the deck does not show (${words(k || 'update')})`);
      }
    }

    function render(ev) {
      evTurn = ev.turn_id || 0;
      try {
        renderEvent(ev);
      } finally {
        evTurn = 0;
      }
    }

    function renderEvent(ev) {
      const d = ev.data || {};
      const t = ev.turn_id;
      switch (ev.kind) {
        case 'stream.gap':
          closeBlock();
          add(h('div', { class: 'ev gap', id: 'gap', text: `older events trimmed (the journal now starts at ${d.first_retained_seq})` }));
          break;
        case 'session.started': meta(`session started${d.run > 1 ? ` (run ${d.run})` : ''}`); break;
        case 'prompt.accepted':
          closeBlock();
          add(h('div', { class: 'ev user', data: { turn: String(t) }, text: d.text + (d.text_truncated ? ' …' : '') }, byLine(d.by)));
          break;
        case 'prompt.rejected': meta(`prompt refused: ${d.type} ${d.message || ''}`, 'bad'); break;
        case 'turn.started': meta(`turn ${t} started${d.attempt > 1 ? ` (attempt ${d.attempt})` : ''}${d.unwatched ? ' in the background: its output arrives every few seconds' : ''}`, '', t); break;
        case 'turn.restarted':
          // A retry after a lost worker: the partial output of the lost attempt goes.
          closeBlock();
          groupFor(t).el.querySelectorAll(`.agent-out[data-turn="${t}"]`).forEach((el) => el.remove());
          for (const [k, v] of tools) if (!v.el.isConnected) tools.delete(k);
          plans.delete(t);
          meta(`turn ${t} restarted (attempt ${d.attempt}): its partial output was dropped${d.resumed ? '; the agent already held the prompt and was asked to continue' : ''}`, 'bad', t);
          break;
        case 'agent.context_lost':
          meta(`the agent lost its memory of this session (${d.reason}); ${d.carried_bytes > 0 ? `${d.carried_bytes} bytes of the conversation were carried over to the new agent session` : 'the conversation was not carried over'}`, 'bad', t);
          break;
        case 'workspace.missing':
          meta(`the workspace ${d.path} is not on the worker that took turn ${t} (${d.action})`, 'bad', t);
          break;
        case 'workspace.restored':
          meta(d.session ? `this fork starts with the files of ${d.session} after its turn ${d.turn}` : `the workspace was restored from the checkpoint of turn ${d.turn}`, '', t);
          break;
        case 'workspace.checkpoint': changes(t, d); break;
        case 'agent.update': agentUpdate(ev); break;
        case 'steer.accepted':
          closeBlock();
          add(h('div', { class: 'ev steer', data: { turn: String(t) }, text: d.text + (d.text_truncated ? ' …' : '') }, byLine(d.by)));
          break;
        case 'steer.rejected': meta(`steer refused: ${d.type} ${d.message || ''}`, 'bad'); break;
        case 'steer.delivered':
          meta(`steer ${t}.${d.offset} ${d.how === 'failed' ? 'not delivered' : 'delivered (' + d.how + ')'}`, d.how === 'failed' ? 'bad' : '');
          break;
        case 'turn.cancelling': meta(`cancelling turn ${t}${d.reason ? ': ' + d.reason : ''}${d.by ? ' by ' + d.by : ''}`, 'bad', t); break;
        case 'turn.ended': meta(`turn ${t} ended: ${d.stop_reason}`, 'turn-end', t); break;
        case 'turn.failed': meta(`turn ${t} failed: ${d.error}`, 'turn-end bad', t); break;
        case 'permission.requested': {
          const tc = d.tool_call || {};
          meta(`permission asked: ${tc.title || tc.toolCallId || d.request_id}${tc.kind ? ` (${tc.kind})` : ''}`);
          break;
        }
        case 'permission.resolved':
          // A person's answer names the person (answered_by); rule, policy, deadline and
          // cancel name themselves (decided_by).
          meta(`permission ${d.outcome}${d.option_id ? ' ' + d.option_id : ''} by ${d.answered_by || d.decided_by}${d.remember ? ', remembered' : ''}`);
          break;
        case 'permission.forgotten': meta(`rule forgotten: ${d.tool}`); break;
        case 'elicitation.requested': meta(`question asked: ${d.message || d.request_id}${d.mode === 'url' ? ' (open ' + d.url + ')' : ''}`); break;
        case 'elicitation.resolved': meta(`question ${d.action}${d.answered_by ? ' by ' + d.answered_by : ''}`); break;
        case 'elicitation.completed': meta('the agent completed the page it asked to open'); break;
        case 'turn.limited': meta(`turn ${t} limited (${d.reason}): runs again at ${new Date(d.retry_at).toISOString().slice(11, 16)} UTC${d.backoff ? ', backing off' : ''}`, 'bad', t); break;
        case 'turn.retry_now': meta(`retry now${d.answered_by ? ' by ' + d.answered_by : ''}`); break;
        case 'policy.changed': meta(`policy ${d.previous || '?'} → ${d.level}${d.by ? ` by ${d.by}` : ''}`); break;
        case 'usage.updated': break;
        case 'viewer.grace_started': meta(`no viewer left: the turn is cancelled at ${new Date(d.until).toLocaleTimeString()} unless one attaches`, 'bad'); break;
        case 'viewer.grace_cancelled': meta('a viewer is back: grace cancelled'); break;
        case 'session.closed': meta(`session closed${d.reason ? ': ' + d.reason : ''}`, 'bad'); break;
        case 'session.deleted': meta(`session deleted${d.error ? ' (its data: ' + d.error + ')' : (d.removed || []).length ? ': removed ' + d.removed.join('; ') : ''}`, 'bad'); break;
        case 'agent.settings':
          meta(`the agent is ready${d.current_mode_id ? ` in mode ${d.current_mode_id}` : ''}${(d.modes || []).length ? ` (${d.modes.length} modes)` : ''}`, '', t);
          break;
        case 'mode.changed': meta(`mode ${d.previous ? d.previous + ' → ' : ''}${d.mode_id}${d.by_policy ? ', set by the policy' : ''}`, '', t); break;
        case 'config_option.changed': meta(`setting ${d.config_id}: ${d.previous ? d.previous + ' → ' : ''}${d.value}`, '', t); break;
        case 'title.changed': meta(`title: ${d.title}`); break;
        default: meta(words(ev.kind || 'event'));
      }
    }

    // -- the stream --
    function connect() {
      if (stopped) return;
      es = new EventSource(`/api/sessions/${enc(id)}/stream?after=${lastSeq}`);
      es.onopen = () => setLive('live');
      es.addEventListener('journal', (e) => {
        const ev = JSON.parse(e.data);
        if (ev.seq <= lastSeq) return;
        lastSeq = ev.seq;
        enqueue(ev);
        if (refreshKinds.has(ev.kind)) refreshSoon();
      });
      es.addEventListener('gap', (e) => {
        const d = JSON.parse(e.data);
        lastSeq = Math.max(lastSeq, d.first_retained_seq - 1);
        enqueue({ kind: 'stream.gap', data: d });
        refreshSoon();
      });
      es.addEventListener('end', () => { streamDone = true; es.close(); setLive('closed'); });
      es.addEventListener('rejected', (e) => {
        streamDone = true;
        es.close();
        const d = JSON.parse(e.data);
        setLive('stopped');
        meta(`stream stopped: ${d.type}: ${d.message}`, 'bad');
      });
      es.onerror = () => {
        if (stopped) return;
        setLive('reconnecting');
        if (es.readyState === EventSource.CLOSED) {
          // The server refused the stream (no such session, signed out, deck down): ask why
          // before trying again; a dropped connection instead reconnects by itself.
          setTimeout(async () => {
            if (stopped) return;
            if (document.hidden) { es = null; return; } // shown again, it connects
            try {
              await api('GET', `/api/sessions/${enc(id)}`);
              connect();
            } catch (x) {
              if (x.status === 404) { streamDone = true; setLive('stopped'); meta(`no session ${id}`, 'bad'); } else if (x.status !== 401) setTimeout(connect, 3000);
            }
          }, 2000);
        }
      };
    }

    // -- the status snapshot: state, steer token, open requests, policy, rules --
    function refreshSoon() {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(refreshStatus, 120);
    }

    async function refreshStatus() {
      clearTimeout(refreshTimer);
      clearTimeout(pollTimer);
      try {
        const st = await api('GET', `/api/sessions/${enc(id)}`);
        if (stopped) return;
        skew = Date.parse(st.server_time) - Date.now();
        status = st;
        showStatus(st);
      } catch (e) {
        if (!stopped && e.status === 404) meta(`no session ${id}`, 'bad');
      }
      if (!stopped) pollTimer = setTimeout(refreshStatus, 10000);
    }

    function showStatus(st) {
      const b = [badge(st.state, st.state)];
      if (st.turn_id) b.push(badge('turn ' + st.turn_id));
      if (st.queue && st.queue.length) b.push(badge(st.queue.length + ' queued'));
      if (st.agent) b.push(badge(agentName(st.agent)));
      if (st.owner) b.push(badge(st.owner + "'s" + (st.sharing ? ' · ' + st.sharing : '')));
      stateBadges.replaceChildren(...b);

      const live = isLive(st.state);
      composer.dataset.token = live ? st.steer_token || '' : '';
      composer.dataset.state = st.state;
      steerBtn.disabled = !live || !st.steer_token;
      cancelBtn.disabled = !live;
      promptBtn.disabled = st.state === 'closed';
      if (note.dataset.said && saidOf != null && (!live || st.turn_id !== saidOf)) {
        delete note.dataset.said;
        note.classList.remove('warn');
      }
      if (!note.dataset.said) {
        note.textContent = live ? `Steering turn ${st.steer_token}` : st.state === 'closed' ? 'The session is closed.' : 'No turn is running: send a prompt.';
      }

      policy.value = st.policy || 'ask_for_risky';
      // The profile's ceiling: its operator forbids allow_all (signals.ProfileInfo).
      const prof = (st.profiles || []).find((x) => x.name === st.agent) || (st.profiles || []).find((x) => x.default);
      const ceiling = (prof && prof.policy_ceiling) || (st.agent_settings && st.agent_settings.policy_ceiling);
      for (const o of policy.options) o.disabled = !!ceiling && o.value === 'allow_all';
      const modes = st.agent_settings && st.agent_settings.asking_modes;
      profiles.textContent = (st.profiles && st.profiles.length)
        ? `Agent profile: ${st.agent || 'default'} (the worker offers ${st.profiles.map((p) => p.name).join(', ')}) · sandbox: ${sandboxLine(st)}`
          + (ceiling ? ` · policy at most ${ceiling} (allow_all forbidden by the worker's operator)` : '')
          + (modes && modes.length ? ` · modes that ask: ${modes.join(', ')}` : '') : '';
      rules.replaceChildren(...(st.rules || []).map((r) => h('li', {},
        h('span', { text: r }),
        operator ? h('button', { class: 'btn', type: 'button', data: { rule: r }, text: 'Forget', onclick: () => forget(r) }) : null)));
      if (!st.rules || !st.rules.length) rules.append(h('li', { class: 'muted', text: 'No remembered rules.' }));

      const perms = st.pending_permissions || [];
      const questions = st.pending_elicitations || [];
      const wait = st.waiting_limit;
      const room = st.waiting_worker;
      const key = perms.map((p) => p.request_id).concat(questions.map((q) => q.request_id),
        wait ? [`limit:${wait.turn_id}:${wait.attempt}:${wait.retry_at}:${wait.retry_now}`] : [],
        room ? [`worker:${room.turn_id}:${room.since}`] : []).join(',');
      if (key !== pendingKey) {
        pendingKey = key;
        pending.replaceChildren(...(room ? [workerCard(room)] : []), ...(wait ? [limitCard(wait)] : []),
          ...perms.map(permCard), ...questions.map(questionCard));
        landOnTarget();
      }
      tick();
    }

    // landOnTarget brings the request the session was opened for into view and focus, once:
    // the card the link names, else the first open permission or question.
    let landed = false;
    function landOnTarget() {
      if (landed) return;
      const cards = Array.from(pending.querySelectorAll('.perm, .question[data-request]'));
      const card = cards.find((c) => c.dataset.request === target) || (target ? null : cards[0]);
      if (!card) return;
      landed = true;
      card.classList.add('target');
      card.tabIndex = -1;
      card.scrollIntoView({ block: 'nearest' });
      card.focus({ preventScroll: true });
    }

    // A turn waiting for capacity: every worker runs as many turns as it may (-turns.max).
    function workerCard(w) {
      return h('div', { class: 'card limit', data: { waiting: String(w.turn_id) } },
        h('div', { class: 'title', text: 'Waiting for a worker with room' }),
        h('div', { class: 'meta', text: `turn ${w.turn_id} · queued since ${new Date(w.since).toISOString().slice(11, 19)} UTC · every worker runs as many turns as it may; the turn starts when one has room` }));
    }

    // A limited turn's wait: when it runs again, why, and "retry now" for operators.
    function limitCard(w) {
      const at = new Date(w.retry_at);
      const what = w.reason === 'service' ? 'the model provider to recover' : 'the usage limit to reset';
      return h('div', { class: 'card limit', data: { limit: String(w.turn_id) } },
        h('div', { class: 'title', text: `Waiting for ${what} at ${at.toISOString().slice(11, 16)} UTC` }),
        h('div', { class: 'meta' }, `turn ${w.turn_id} · attempt ${w.attempt}${w.backoff ? ' · backing off: the agent gave no reset time' : ''} · `,
          h('span', { class: 'countdown', data: { deadline: w.retry_at, what: 'runs again' } })),
        w.message ? h('div', { class: 'meta', text: w.message }) : null,
        h('div', { class: 'row' },
          h('button', { class: 'btn allow', type: 'button', disabled: !operator || w.retry_now, text: w.retry_now ? 'Retrying…' : 'Retry now',
            onclick: (e) => retryNow(w, e.currentTarget) })),
        operator ? null : h('div', { class: 'meta', text: 'Observers cannot retry.' }));
    }

    async function retryNow(w, btn) {
      btn.disabled = true;
      try {
        await api('POST', `/api/sessions/${enc(id)}/retry`, { turn_id: w.turn_id });
        toast('Retry now: sent');
      } catch (e) {
        toast(`${e.type}: ${e.message}`, true);
        btn.disabled = !operator;
      }
      pendingKey = null;
      refreshStatus();
    }

    // A question of the agent's (elicitation): a form built from its schema (ACP's flat
    // object of strings, numbers, booleans and enums), or the URL to open.
    function questionCard(q) {
      let schema = {};
      try { schema = typeof q.schema === 'string' ? JSON.parse(q.schema) : (q.schema || {}); } catch (e) { schema = {}; }
      const props = schema.properties || {};
      const required = new Set(schema.required || []);
      const fields = Object.keys(props).map((name) => field(name, props[name], required.has(name)));
      const form = h('form', { class: 'question' }, ...fields.map((f) => f.el));
      const buttons = [];
      if (q.mode !== 'url') {
        buttons.push(h('button', { class: 'btn allow', type: 'submit', disabled: !operator, text: 'Answer' }));
      } else {
        buttons.push(h('button', { class: 'btn allow', type: 'submit', disabled: !operator, text: 'Done' }));
      }
      buttons.push(h('button', { class: 'btn reject', type: 'button', disabled: !operator, text: 'Decline',
        onclick: () => answerQuestion(q, 'decline', undefined, form) }));
      form.append(h('div', { class: 'row' }, ...buttons));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        const content = {};
        for (const f of fields) {
          const v = f.value();
          if (v !== undefined) content[f.name] = v;
        }
        answerQuestion(q, 'accept', q.mode === 'url' ? undefined : content, form);
      });
      return h('div', { class: 'card question', data: { request: q.request_id } },
        h('div', { class: 'title', text: q.message || 'The agent asks' }),
        h('div', { class: 'meta' }, `question · turn ${q.turn_id} · `,
          h('span', { class: 'countdown', data: { deadline: q.deadline } })),
        q.mode === 'url' && q.url ? (webURL(q.url) ? h('a', { href: webURL(q.url), target: '_blank', rel: 'noopener noreferrer', text: q.url })
          : h('span', { class: 'meta url', text: q.url })) : null,
        form,
        operator ? null : h('div', { class: 'meta', text: 'Observers cannot answer.' }));
    }

    // field is one input of a question's form: its element, and its value as the schema types it.
    function field(name, p, required) {
      const label = (p.title || name) + (required ? ' *' : '');
      const options = p.enum || (p.oneOf || []).map((o) => o.const);
      const names = p.enumNames || (p.oneOf || []).map((o) => o.title || o.const);
      let input, value;
      if (p.type === 'boolean') {
        input = h('input', { type: 'checkbox', name });
        if (p.default === true) input.checked = true;
        value = () => input.checked;
      } else if (p.type === 'array') {
        const items = (p.items && (p.items.enum || (p.items.anyOf || []).map((o) => o.const))) || [];
        input = h('select', { name, multiple: true }, ...items.map((v) => h('option', { value: v, text: String(v) })));
        value = () => Array.from(input.selectedOptions).map((o) => o.value);
      } else if (options.length) {
        input = h('select', { name, required },
          ...(required ? [] : [h('option', { value: '', text: '—' })]),
          ...options.map((v, i) => h('option', { value: v, text: String(names[i] || v) })));
        if (p.default !== undefined) input.value = p.default;
        value = () => (input.value === '' ? undefined : input.value);
      } else if (p.type === 'number' || p.type === 'integer') {
        input = h('input', { type: 'number', name, required, step: p.type === 'integer' ? '1' : 'any' });
        if (p.minimum !== undefined) input.min = p.minimum;
        if (p.maximum !== undefined) input.max = p.maximum;
        if (p.default !== undefined) input.value = p.default;
        value = () => (input.value === '' ? undefined : Number(input.value));
      } else {
        const type = { email: 'email', uri: 'url', date: 'date', 'date-time': 'datetime-local' }[p.format] || 'text';
        input = h('input', { type, name, required });
        if (p.minLength !== undefined) input.minLength = p.minLength;
        if (p.maxLength !== undefined) input.maxLength = p.maxLength;
        if (p.default !== undefined) input.value = p.default;
        value = () => (input.value === '' ? undefined : input.value);
      }
      const el = h('label', { class: 'field' }, h('span', { text: label }), input,
        p.description ? h('span', { class: 'meta', text: p.description }) : null);
      return { name, el, value };
    }

    async function answerQuestion(q, action, content, form) {
      form.querySelectorAll('button').forEach((b) => { b.disabled = true; });
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/questions/${enc(q.request_id)}`, { action, content });
        const res = r.resolution || {};
        toast(res.action && res.action !== action ? `Already answered: ${res.action} by ${res.answered_by || 'someone'}` : `${action}: sent`);
      } catch (e) {
        // A bad answer (the schema's check) leaves the question open.
        toast(`${e.type}: ${e.message}`, true);
        form.querySelectorAll('button').forEach((b) => { b.disabled = !operator; });
        return;
      }
      pendingKey = null;
      refreshStatus();
    }

    function permCard(p) {
      const buttons = (p.options || []).map((o) => {
        const kind = o.kind || '';
        return h('button', {
          class: 'btn ' + (kind.startsWith('allow') ? 'allow' : kind.startsWith('reject') ? 'reject' : ''),
          type: 'button', data: { option: o.optionId }, disabled: !operator, text: o.name || o.optionId,
          onclick: (e) => answer(p, o, e.currentTarget.parentElement),
        });
      });
      return h('div', { class: 'card perm', data: { request: p.request_id } },
        h('div', { class: 'title', text: p.title || 'Permission requested' }),
        h('div', { class: 'meta' }, `${p.kind || 'tool'} · turn ${p.turn_id} · `,
          h('span', { class: 'countdown', data: { deadline: p.deadline } })),
        h('div', { class: 'row' }, buttons),
        operator ? null : h('div', { class: 'meta', text: 'Observers cannot answer.' }));
    }

    function tick() {
      for (const el of pending.querySelectorAll('.countdown')) {
        const left = Math.round((Date.parse(el.dataset.deadline) - (Date.now() + skew)) / 1000);
        const m = Math.floor(Math.max(left, 0) / 60);
        const s = String(Math.max(left, 0) % 60).padStart(2, '0');
        if (el.dataset.what) {
          el.textContent = left <= 0 ? `${el.dataset.what} now` : `${el.dataset.what} in ${m}:${s}`;
        } else if (left <= 0) {
          el.textContent = 'deadline passed: denying';
        } else {
          el.textContent = `answer within ${m}:${s}`;
        }
        el.classList.toggle('low', left < 60);
      }
    }
    const tickTimer = setInterval(tick, 1000);

    // -- actions --
    async function answer(p, o, row) {
      row.querySelectorAll('button').forEach((b) => { b.disabled = true; });
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/permissions/${enc(p.request_id)}`, { option_id: o.optionId, client_msg_id: newId() });
        const res = r.resolution;
        if (res.decided_by !== 'user' || res.option_id !== o.optionId) {
          toast(`Already decided: ${res.outcome} ${res.option_id || ''} by ${res.answered_by || res.decided_by}`);
        } else {
          toast(`${o.name || o.optionId}: sent`);
        }
      } catch (e) {
        toast(`${e.type}: ${e.message}`, true);
        row.querySelectorAll('button').forEach((b) => { b.disabled = !operator; });
      }
      pendingKey = null; // redraw the cards whatever the refresh brings
      refreshStatus();
    }

    function busy(on) {
      for (const b of [steerBtn, promptBtn, cancelBtn]) b.classList.toggle('busy', on);
      text.disabled = on;
    }
    // What the last action said stays until the person types again, or, when it was said
    // about a live turn (a steer's "Steering turn N"), until that turn is over.
    let saidOf = null; // the turn a said note is about, when it was live
    function say(msg, warn) {
      note.textContent = msg;
      note.dataset.said = '1';
      note.classList.toggle('warn', !!warn);
      saidOf = status && isLive(status.state) ? status.turn_id : null;
    }
    text.addEventListener('input', () => { delete note.dataset.said; note.classList.remove('warn'); });

    steerBtn.addEventListener('click', async () => {
      const t = text.value.trim();
      if (!t) { say('Type what the agent should do differently, then Steer.', true); return; }
      const expected = composer.dataset.token; // read at the moment of sending
      busy(true);
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/steer`, { text: t, expected_turn_id: expected, client_msg_id: newId() });
        text.value = '';
        composer.dataset.token = r.next_expected_turn_id;
        say(`Steer ${r.outcome} (turn ${r.ref.turn_id}, steer ${r.ref.offset}). Steering turn ${r.next_expected_turn_id}`);
        note.classList.remove('warn');
      } catch (e) {
        if (e.type === 'stale_turn') {
          const d = e.details || {};
          await refreshStatus();
          say(`Stale: you steered ${d.expected || expected}, the turn is now at ${d.actual || composer.dataset.token}. Refreshed — read what changed, then Steer again.`, true);
        } else if (e.type === 'no_live_turn') {
          await refreshStatus();
          say('No turn is running now: send it as a Prompt instead.', true);
        } else {
          say(`${e.type}: ${e.message}`, true);
        }
      } finally {
        busy(false);
      }
    });

    promptBtn.addEventListener('click', async () => {
      const t = text.value.trim();
      if (!t) { say('Type a prompt first.', true); return; }
      busy(true);
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/prompt`, { text: t, client_message_id: newId() });
        text.value = '';
        note.classList.remove('warn');
        say(r.position ? `Queued as turn ${r.turn_id} (position ${r.position}).` : `Turn ${r.turn_id} starts now.`);
      } catch (e) {
        say(`${e.type}: ${e.message}`, true);
      } finally {
        busy(false);
      }
    });

    cancelBtn.addEventListener('click', async () => {
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/cancel`, {});
        toast(r.outcome === 'cancelling' ? 'Cancelling the turn' : 'Already cancelling');
      } catch (e) {
        toast(e.type === 'no_live_turn' ? 'No turn is running.' : `${e.type}: ${e.message}`, true);
      }
      refreshStatus();
    });

    policy.addEventListener('change', async () => {
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/policy`, { level: policy.value });
        toast('Policy: ' + r.level);
      } catch (e) {
        toast(`${e.type}: ${e.message}`, true);
      }
      refreshStatus();
    });

    rewindBtn.addEventListener('click', async () => {
      const n = Number(rewindTurn.value);
      if (!Number.isInteger(n) || n < 1) { toast('Name a turn to rewind to.', true); return; }
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/rewind`, { to_turn: n });
        toast(`Rewound to turn ${n} as ${r.session_id}`);
        location.hash = '#/s/' + enc(r.session_id);
      } catch (e) {
        toast(`${e.type}: ${e.message}`, true);
      }
    });

    async function forget(rule) {
      try {
        const r = await api('POST', `/api/sessions/${enc(id)}/forget`, { tool: rule });
        toast(r.forgotten ? 'Forgotten: ' + rule : 'Was not remembered: ' + rule);
      } catch (e) {
        toast(`${e.type}: ${e.message}`, true);
      }
      refreshStatus();
    }

    // A hidden tab lets its stream go: a browser gives a host six connections, so a stream
    // per open tab left the seventh tab blank. Shown again, it reads on from lastSeq.
    const onVisible = () => {
      if (document.hidden) {
        if (es && !streamDone) { es.close(); es = null; setLive('paused'); }
        return;
      }
      refreshStatus();
      if (!es && !streamDone && !stopped) connect();
    };
    document.addEventListener('visibilitychange', onVisible);
    refreshStatus();
    if (!document.hidden) connect();
    return {
      stop() {
        stopped = true;
        if (es) es.close();
        clearTimeout(refreshTimer);
        clearTimeout(pollTimer);
        clearInterval(tickTimer);
        document.removeEventListener('visibilitychange', onVisible);
        setLive(null);
      },
    };
  }

  // ---- routing ---------------------------------------------------------------------------

  // sessionLink reads a link to one session, #/s/ID, or to one of its open requests,
  // #/s/ID/REQUEST; null for any other address.
  function sessionLink() {
    const m = location.hash.match(/^#\/s\/([^/]+)(?:\/([^/]+))?$/);
    if (!m) return null;
    try {
      return { id: decodeURIComponent(m[1]), request: m[2] ? decodeURIComponent(m[2]) : '' };
    } catch (e) {
      return null;
    }
  }

  function route(msg) {
    if (view) view.stop();
    view = null;
    if (!role) { view = loginView(typeof msg === 'string' ? msg : ''); return; }
    const link = sessionLink();
    view = link ? sessionView(link.id, link.request) : listView();
    window.scrollTo(0, 0);
  }

  async function boot() {
    document.getElementById('logout').addEventListener('click', async () => {
      try { await api('POST', '/api/logout', {}); } catch (e) { /* signed out either way */ }
      signedOut();
    });
    // The URL `starter web` prints carries the token in the fragment, which no server sees:
    // trade it for the cookie and take it out of the address bar and history at once.
    const m = location.hash.match(/^#token=([^&]*)/);
    if (m) {
      history.replaceState(null, '', location.pathname + location.search + '#/');
      try {
        signedIn(await api('POST', '/api/login', { token: decodeURIComponent(m[1]) }));
      } catch (e) {
        window.addEventListener('hashchange', () => route());
        route(e.status === 401 ? 'The token in that link is not valid here.' : e.message);
        return;
      }
    }
    if (!role && remembered()) {
      try {
        signedIn(await api('GET', '/api/whoami'));
      } catch (e) { remembered(false); /* signed out since: the login view */ }
    }
    window.addEventListener('hashchange', () => route());
    route();
  }

  boot();
})();
