@_exported import CloudStoreWire

/// GRDB has a `Record` class too; inside this module `Record` is always the wire's.
public typealias Record = CloudStoreWire.Record
