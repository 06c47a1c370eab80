package signals

// Deleting a session (contract §3 "Deleting"): close it and remove what tacp keeps of it on
// the worker that holds its agent.

const (
	// EventSessionDeleted journals, after session.closed, what a deleting close removed
	// (SessionDeletedData).
	EventSessionDeleted = "session.deleted"
	// ActivityDeleteSessionData removes a closed session's data on a worker (its host queue).
	ActivityDeleteSessionData = "DeleteSessionData"
)

// DeleteSessionDataRequest names what to remove: the session's sandbox folders (its agent's
// per-session state and temp), and its workspace when Workspace is set (WorkspaceName is
// the session's config: "" is its own folder).
type DeleteSessionDataRequest struct {
	SessionID     string `json:"session_id"`
	Workspace     bool   `json:"workspace,omitempty"`
	WorkspaceName string `json:"workspace_name,omitempty"`
}

// DeleteSessionDataResult says what was removed, and what was kept and why.
type DeleteSessionDataResult struct {
	Removed []string `json:"removed,omitempty"`
	Kept    []string `json:"kept,omitempty"`
}

// SessionDeletedData is the data of session.deleted: the worker that removed the session's
// data (none: no worker held any), what it removed and kept, or why it could not.
type SessionDeletedData struct {
	Host    string   `json:"host,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Kept    []string `json:"kept,omitempty"`
	Error   string   `json:"error,omitempty"`
}
