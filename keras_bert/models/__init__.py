from keras_bert.models.encoder import BertEncoder
