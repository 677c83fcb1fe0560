FROM alpine
ADD scripts/pipeline.sh /scripts/pipeline.sh
ADD resources /resources
RUN chmod +x /scripts/pipeline.sh
CMD [ "sh", "-c", "/scripts/pipeline.sh" ]
ENTRYPOINT []
