package deadletter

// Rescans is how many passes this DLQ's replays, purges and retries'
// searches for their copies have made again because a DLQ held messages
// they could not see.
func (d *DLQ) Rescans() int64 { return d.rescans.Load() }
