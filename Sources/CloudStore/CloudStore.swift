@_exported import CloudStoreWire
