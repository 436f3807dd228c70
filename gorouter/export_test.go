package gorouter

// ReconnectDelay is reconnectDelay, for its bounds.
var ReconnectDelay = reconnectDelay
