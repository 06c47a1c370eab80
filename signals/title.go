package signals

// A session's title (contract §3, set_title): a short name a person gives the session, so
// that a list of sessions reads as what they are about rather than as their ids. It is
// session state, shown by status and the Temporal UI's Current Details, carried across
// continue-as-new, and journaled as title.changed when it changes.

// UpdateSetTitle sets the session's title (with a signal twin of the same name and
// payload); EventTitleChanged journals a change.
const (
	UpdateSetTitle    = "set_title"
	EventTitleChanged = "title.changed"
)

// MaxTitleBytes bounds a title.
const MaxTitleBytes = 200

// SetTitleRequest is set_title's request. An empty Title clears the title. A viewer
// attached as observer is refused (forbidden).
type SetTitleRequest struct {
	Title    string `json:"title"`
	ViewerID string `json:"viewer_id,omitempty"`
	// By names who sets it (as PromptRequest.By); journaled in session.title_changed.
	By string `json:"by,omitempty"`
}

// SetTitleResult is set_title's answer: the title now, and the one it replaced.
type SetTitleResult struct {
	Title    string `json:"title"`
	Previous string `json:"previous,omitempty"`
}

// TitleChangedData is the data of title.changed.
type TitleChangedData struct {
	Title    string `json:"title"`
	Previous string `json:"previous,omitempty"`
	ViewerID string `json:"viewer_id,omitempty"`
	By       string `json:"by,omitempty"`
}
