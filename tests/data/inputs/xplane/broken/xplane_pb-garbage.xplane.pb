
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf
ÿÿÿ/device:GPU:0 not a protobuf