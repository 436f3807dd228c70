package names

// Label selectors by source type: the informers, the start-up checks and the sweeps list opi's
// objects of one kind of work with these, so that no list strays into another's objects.
const (
	// AppSelector selects the objects opi made for LRPs.
	AppSelector = LabelSourceType + "=" + SourceTypeApp
	// TaskSelector selects the Jobs (and their pods) opi made for tasks.
	TaskSelector = LabelSourceType + "=" + SourceTypeTask
)
